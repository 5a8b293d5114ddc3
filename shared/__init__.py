"""Code that several services share and the service SDK does not hold, because it needs
more than the SDK's dependencies (:mod:`shared.meaning` needs numpy and ``wordllama``).
deploy/service.Dockerfile copies this package into every service image; a service that
imports a module of it lists that module's dependencies in its own ``requirements.txt``."""
