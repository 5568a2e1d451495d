import sys

from kcodec.cli import main

sys.exit(main())
