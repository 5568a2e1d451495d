import sys

from tools.gen_protocol.generate import main

sys.exit(main())
