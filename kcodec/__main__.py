import sys

if sys.argv[1:] == ["--version"]:   # at once: not even the command line's parser
    from kcodec._version import __version__

    print(f"kcodec {__version__}")
    sys.exit(0)

from kcodec.cli import main  # noqa: E402

sys.exit(main())
