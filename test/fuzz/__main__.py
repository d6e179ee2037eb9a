import sys

from fuzz.run import main

sys.exit(main())
