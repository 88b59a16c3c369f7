"""``python -m amqp``: iot-amqp."""

import sys

from amqp.cli import main

sys.exit(main())
