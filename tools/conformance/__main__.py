import sys

from tools.conformance.run import main

sys.exit(main())
