from odradek.cli import main

raise SystemExit(main())
