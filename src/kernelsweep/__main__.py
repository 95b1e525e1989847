import sys

from kernelsweep.commands.cli import main

sys.exit(main())
