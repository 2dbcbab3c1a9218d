import sys

from tools.conformance import main

sys.exit(main())
