"""ragshield as an HTTP service: the defended pipeline behind API keys, budgets,
extraction-aware throttling and an audit log.

Example::

    from ragshield.server import Service, create_app, load_config
    app = create_app(Service.from_config(load_config("examples/server.toml")))
    # or from a shell: ragshield serve --config examples/server.toml
"""

from __future__ import annotations

from ragshield.server.app import create_app
from ragshield.server.config import ServerConfig, load_config
from ragshield.server.service import Refused, Service

__all__ = ["Refused", "ServerConfig", "Service", "create_app", "load_config"]
