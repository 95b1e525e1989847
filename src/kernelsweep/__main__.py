import sys

from kernelsweep.cli import main

sys.exit(main())
