"""What the canary answers: Docker Engine API 1.50 and Podman's libpod API, as a pure table.

The answers are just convincing enough that real clients (docker CLI 28, docker-py 7,
podman-remote 4) go on to send their real, destructive requests; the canary never runs or
removes anything. Wire facts: notes/docker-wire.md. ``answer`` never raises, whatever the
method and path.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

ENGINE_VERSION = "28.2.2"
API_VERSION = "1.50"  # v29 clients refuse below 1.40; v28 clients cap at 1.50
MIN_API_VERSION = "1.24"
LIBPOD_VERSION = "4.9.3"
CANARY_NAME = "no-docker-canary"

# First path segments of the Engine and libpod APIs: where the endpoint starts after an
# optional base path, ``/vN.N`` and ``/libpod``.
RESOURCES = frozenset({
    "_ping", "version", "info", "events", "system", "containers", "images", "networks",
    "volumes", "exec", "build", "swarm", "nodes", "services", "tasks", "secrets", "configs",
    "plugins", "distribution", "session", "grpc", "auth", "commit", "pods", "manifests",
    "generate", "play", "kube", "artifacts", "quadlets",
})
_VERSION_SEGMENT = re.compile(r"v[0-9]+(?:\.[0-9]+)*")


class ApiPath(NamedTuple):
    """A request path taken apart: ``{base}/v{version}/libpod{endpoint}``."""

    base: str
    version: str | None
    libpod: bool
    endpoint: str


def split_api_path(path: str) -> ApiPath:
    """Find the endpoint in ``path`` whatever base path or version prefix comes before it."""
    segments = path.split("/")
    for index, segment in enumerate(segments):
        if index == 0 or segment not in RESOURCES:
            continue
        start = index
        libpod = segments[start - 1] == "libpod"
        if libpod:
            start -= 1
        version = None
        if start > 1 and _VERSION_SEGMENT.fullmatch(segments[start - 1]):
            version = segments[start - 1][1:]
            start -= 1
        return ApiPath("/".join(segments[:start]), version, libpod, "/" + "/".join(segments[index:]))
    if len(segments) > 2 and _VERSION_SEGMENT.fullmatch(segments[1]):
        return ApiPath("", segments[1][1:], False, "/" + "/".join(segments[2:]))
    return ApiPath("", None, False, path)


class Answer(NamedTuple):
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    upgrade: str = ""  # non-empty: a 101 switching to this protocol, then the canary hangs up


class Request(NamedTuple):
    """The parts of a request the answer depends on."""

    method: str
    path: str
    params: Mapping[str, str] = MappingProxyType({})
    headers: Mapping[str, str] = MappingProxyType({})  # names lower-cased
    nonce: str = "0"  # makes ids differ between requests (connection and request number)


def _json(status: int, value: Any) -> Answer:
    return Answer(status, json.dumps(value).encode() + b"\n")


_EMPTY_LIST = _json(200, [])


def _json_lines(values: list[Any]) -> Answer:
    return Answer(200, b"".join(json.dumps(value).encode() + b"\r\n" for value in values))


def error(status: int, message: str) -> Answer:
    return _json(status, {"message": message})


def fake_id(nonce: str, what: str = "container") -> str:
    return hashlib.sha256(f"{CANARY_NAME}:{what}:{nonce}".encode()).hexdigest()


def common_headers(libpod: bool) -> tuple[tuple[str, str], ...]:
    """What a real daemon sends on every response (moby api/server/middleware)."""
    if libpod:
        return (("Api-Version", "1.41"), ("Libpod-API-Version", LIBPOD_VERSION),
                ("Libpod-Buildah-Version", "1.33.7"), ("Server", f"Libpod/{LIBPOD_VERSION} (linux)"),
                ("Ostype", "linux"), ("Docker-Experimental", "true"))
    return (("Api-Version", API_VERSION), ("Ostype", "linux"), ("Docker-Experimental", "false"),
            ("Server", f"Docker/{ENGINE_VERSION} (linux)"))


def _ping(request: Request, api: ApiPath) -> Answer:
    headers = (("Builder-Version", "1" if api.libpod else "2"), ("Swarm", "inactive"),
               ("Cache-Control", "no-cache, no-store, must-revalidate"), ("Pragma", "no-cache"))
    body = b"" if request.method == "HEAD" else b"OK"
    return Answer(200, body, "text/plain; charset=utf-8", headers)


def _version(request: Request, api: ApiPath) -> Answer:
    return _json(200, {
        "Platform": {"Name": f"{CANARY_NAME} (fake engine, runs nothing)"},
        "Version": LIBPOD_VERSION if api.libpod else ENGINE_VERSION,
        "ApiVersion": "1.41" if api.libpod else API_VERSION,
        "MinAPIVersion": MIN_API_VERSION, "GitCommit": "canary", "GoVersion": "go1.24",
        "Os": "linux", "Arch": "amd64", "KernelVersion": "canary", "BuildTime": "",
        "Components": [{"Name": "Engine", "Version": ENGINE_VERSION, "Details": {
            "ApiVersion": API_VERSION, "MinAPIVersion": MIN_API_VERSION, "GitCommit": "canary",
            "GoVersion": "go1.24", "Os": "linux", "Arch": "amd64", "KernelVersion": "canary",
            "BuildTime": "", "Experimental": "false"}}],
    })


def _info(request: Request, api: ApiPath) -> Answer:
    if api.libpod:
        return _json(200, {"host": {"hostname": CANARY_NAME, "os": "linux", "arch": "amd64"},
                           "store": {"containerStore": {"number": 0}, "imageStore": {"number": 0}},
                           "registries": {},
                           "version": {"Version": LIBPOD_VERSION, "APIVersion": LIBPOD_VERSION}})
    return _json(200, {
        "ID": fake_id("engine", "engine")[:36], "Name": CANARY_NAME, "ServerVersion": ENGINE_VERSION,
        "Containers": 0, "ContainersRunning": 0, "ContainersPaused": 0, "ContainersStopped": 0,
        "Images": 0, "Driver": "overlay2", "OperatingSystem": f"{CANARY_NAME} (fake engine, runs nothing)",
        "OSType": "linux", "Architecture": "x86_64", "NCPU": 1, "MemTotal": 0, "KernelVersion": "canary",
        "Labels": [f"{CANARY_NAME}=1"], "DockerRootDir": "/nonexistent", "SecurityOptions": [],
        "Swarm": {"LocalNodeState": "inactive", "ControlAvailable": False},
        "Plugins": {"Volume": [], "Network": [], "Authorization": None, "Log": []}, "Warnings": None,
    })


def _empty_list(request: Request, api: ApiPath) -> Answer:
    return _EMPTY_LIST


def _volume_list(request: Request, api: ApiPath) -> Answer:
    return _json(200, [] if api.libpod else {"Volumes": [], "Warnings": None})


_PRUNED = {"containers": "ContainersDeleted", "images": "ImagesDeleted", "volumes": "VolumesDeleted",
           "networks": "NetworksDeleted", "build": "CachesDeleted"}


def _prune(request: Request, api: ApiPath) -> Answer:
    what = api.endpoint.split("/")[1]
    if api.libpod:
        if what == "system":
            return _json(200, {"PodPruneReport": None, "ContainerPruneReports": None,
                               "ImagePruneReports": None, "NetworkPruneReports": None,
                               "VolumePruneReports": None, "ReclaimedSpace": 0})
        return _json(200, [])
    report: dict[str, Any] = {_PRUNED.get(what, "Deleted"): []}
    if what != "networks":
        report["SpaceReclaimed"] = 0
    return _json(200, report)


def _image_delete(request: Request, api: ApiPath) -> Answer:
    name = api.endpoint.split("/", 2)[2] if api.endpoint.count("/") >= 2 else ""
    if api.libpod:
        return _json(200, {"Deleted": [], "Untagged": [name] if name != "remove" else [], "Errors": [],
                           "ExitCode": 0})
    return _json(200, [{"Untagged": name}, {"Deleted": "sha256:" + fake_id(name, "image")}])


def _container_delete(request: Request, api: ApiPath) -> Answer:
    if api.libpod:
        name = api.endpoint.split("/")[2]
        return _json(200, [{"Id": name, "Err": None, "RawInput": name}])
    return Answer(204)


def _created(request: Request, api: ApiPath) -> Answer:
    return _json(201, {"Id": fake_id(request.nonce), "Warnings": []})


def _upgraded(request: Request, api: ApiPath) -> Answer:
    # The CLI hijacks attach/exec start with "Upgrade: tcp" and fails on anything but 101
    # (docker/cli client/hijack.go); buildx does the same with "Upgrade: h2c" on /grpc, /session.
    wanted = request.headers.get("upgrade", "")
    if wanted:
        return Answer(101, b"", "application/vnd.docker.raw-stream", (("Connection", "Upgrade"),
                                                                      ("Upgrade", wanted)), upgrade=wanted)
    return Answer(200, b"", "application/vnd.docker.raw-stream")


def _wait(request: Request, api: ApiPath) -> Answer:
    return _json(200, 0 if api.libpod else {"StatusCode": 0})


def _no_content(request: Request, api: ApiPath) -> Answer:
    return Answer(204)


def _pull(request: Request, api: ApiPath) -> Answer:
    image = request.params.get("fromImage") or request.params.get("reference") or "image"
    tag = request.params.get("tag") or "latest"
    digest = "sha256:" + fake_id(f"{image}:{tag}", "image")
    if api.libpod:
        return _json_lines([{"stream": f"Trying to pull {image}:{tag}...\n"},
                            {"images": [digest], "id": digest}])
    return _json_lines([{"status": f"Pulling from {image}", "id": tag},
                        {"status": f"Digest: {digest}"},
                        {"status": f"Status: Downloaded newer image for {image}:{tag}"}])


def _build(request: Request, api: ApiPath) -> Answer:
    image_id = "sha256:" + fake_id(request.nonce, "image")
    return _json_lines([{"stream": "Step 1/1 : (no-docker canary: nothing is built)\n"},
                        {"aux": {"ID": image_id}}, {"stream": f"Successfully built {image_id[7:19]}\n"}])


def _system_df(request: Request, api: ApiPath) -> Answer:
    return _json(200, {"LayersSize": 0, "Images": [], "Containers": [], "Volumes": [], "BuildCache": []})


def _exec_inspect(request: Request, api: ApiPath) -> Answer:
    return _json(200, {"ID": api.endpoint.split("/")[2], "Running": False, "ExitCode": 0, "Pid": 0})


def _not_found(what: str) -> Callable[[Request, ApiPath], Answer]:
    def answer(request: Request, api: ApiPath) -> Answer:
        return error(404, f"No such {what}: {api.endpoint.split('/')[2]}")
    return answer


def _container_inspect(request: Request, api: ApiPath) -> Answer:
    # Clients inspect before exec and after create (docker exec, docker-py's run): a container
    # that "exists and runs" lets them go on to the request that matters.
    name = api.endpoint.split("/")[2]
    container_id = name if re.fullmatch(r"[0-9a-f]{64}", name) else fake_id(name)
    return _json(200, {
        "Id": container_id, "Name": f"/{name}", "Image": "sha256:" + fake_id("image", "image"),
        "Created": "2026-01-01T00:00:00Z", "Path": "true", "Args": [],
        "State": {"Status": "running", "Running": True, "Paused": False, "Restarting": False,
                  "Dead": False, "Pid": 0, "ExitCode": 0, "Error": ""},
        "Config": {"Image": "canary", "Tty": False, "OpenStdin": False, "AttachStdout": True,
                   "AttachStderr": True, "Labels": {}, "Env": []},
        "HostConfig": {"AutoRemove": False, "LogConfig": {"Type": "json-file", "Config": {}}},
        "NetworkSettings": {"Networks": {}}, "Mounts": [],
    })


def _image_inspect(request: Request, api: ApiPath) -> Answer:
    name = api.endpoint[len("/images/"):-len("/json")]
    return _json(200, {"Id": "sha256:" + fake_id(name, "image"), "RepoTags": [name], "RepoDigests": [],
                       "Created": "2026-01-01T00:00:00Z", "Size": 0, "Os": "linux", "Architecture": "amd64",
                       "Config": {"Cmd": ["true"], "Env": [], "Labels": {}}, "RootFS": {"Type": "layers"}})


def _swarm(request: Request, api: ApiPath) -> Answer:
    return error(503, "This node is not a swarm manager. Use \"docker swarm init\" or \"docker swarm join\" "
                      "to connect this node to swarm and try again.")


def _volume_create(request: Request, api: ApiPath) -> Answer:
    name = fake_id(request.nonce, "volume")
    return _json(201, {"Name": name, "Driver": "local", "Mountpoint": f"/nonexistent/{name}",
                       "Scope": "local"})


def _ok_object(request: Request, api: ApiPath) -> Answer:
    return _json(200, {})


def _auth(request: Request, api: ApiPath) -> Answer:
    return _json(200, {"Status": "Login Succeeded"})


def _stream_ended(request: Request, api: ApiPath) -> Answer:
    return Answer(200, b"", "application/vnd.docker.raw-stream")


_ANY = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
_GET = frozenset({"GET", "HEAD"})
_POST = frozenset({"POST"})
_DELETE = frozenset({"DELETE"})
_NAME = r"[^/]+"

# (methods, endpoint pattern, answer); the first match wins.
ROUTES: tuple[tuple[frozenset[str], re.Pattern[str], Callable[[Request, ApiPath], Answer]], ...] = tuple(
    (methods, re.compile(pattern), handler) for methods, pattern, handler in (
        (_GET, r"/_ping", _ping),
        (_GET, r"/version", _version),
        (_GET, r"/info", _info),
        (_GET, r"/system/df", _system_df),
        (_GET, r"/events", _stream_ended),
        (_GET, r"/(containers|images|networks|pods|plugins|services|tasks|nodes|secrets|configs)(/json)?",
         _empty_list),
        (_GET, r"/volumes(/json)?", _volume_list),
        (_GET, r"/images/search", _empty_list),
        (_POST, r"/(containers|images|volumes|networks|build|pods|system)/prune", _prune),
        (_POST, r"/volumes/create", _volume_create),
        (_POST, r"/(containers|networks|exec|pods)/create", _created),
        (_POST, r"/containers/" + _NAME + r"/exec", _created),
        (_POST, r"/commit", _created),
        (_POST, r"/containers/" + _NAME + r"/attach", _upgraded),
        (_POST, r"/containers/" + _NAME + r"/start", _no_content),
        (_POST, r"/exec/" + _NAME + r"/start", _upgraded),
        (_POST, r"/(grpc|session)", _upgraded),
        (_POST, r"/containers/" + _NAME + r"/wait", _wait),
        (_POST, r"/containers/" + _NAME + r"/(stop|restart|kill|pause|unpause|rename|resize)", _no_content),
        (_POST, r"/containers/" + _NAME + r"/update", _ok_object),
        (_POST, r"/(images/create|images/pull|images/" + _NAME + r"/push)", _pull),
        (_POST, r"/(build|libpod/build)", _build),
        (_POST, r"/images/.+/tag", lambda request, api: Answer(201)),
        (_POST, r"/images/load",
         lambda request, api: _json_lines([{"stream": "Loaded image: canary:latest\n"}])),
        (_POST, r"/networks/" + _NAME + r"/(connect|disconnect)", lambda request, api: Answer(200)),
        (_POST, r"/auth", _auth),
        (_ANY, r"/swarm(/.*)?|/(nodes|services|tasks|secrets|configs)/.*", _swarm),
        (_GET, r"/containers/" + _NAME + r"/(logs|attach/ws|export|archive)", _stream_ended),
        (_GET, r"/containers/" + _NAME + r"/top",
         lambda request, api: _json(200, {"Titles": [], "Processes": []})),
        (_GET, r"/containers/" + _NAME + r"/json", _container_inspect),
        (_GET, r"/images/.+/json", _image_inspect),
        (_GET, r"/(volumes|networks)/" + _NAME, _not_found("object")),
        (_GET, r"/exec/" + _NAME + r"/json", _exec_inspect),
        (_DELETE, r"/images/.+", _image_delete),
        (_DELETE, r"/containers/" + _NAME, _container_delete),
        (_DELETE, r"/.+", _no_content),
    )
)


_REFUSED = error(403, "refused by the no-docker canary (--mode refuse); this request was recorded")
_PAGE_NOT_FOUND = error(404, "page not found")


def answer(request: Request, mode: str = "answer", api: ApiPath | None = None) -> Answer:
    """The answer to ``request``: the Engine table in ``answer`` mode, an error in ``refuse``.

    ``api`` is ``split_api_path(request.path)`` when the caller has it already.
    """
    api = api or split_api_path(request.path)
    extra = common_headers(api.libpod)
    if mode == "refuse":
        return Answer(_REFUSED.status, _REFUSED.body, _REFUSED.content_type, extra)
    found = _PAGE_NOT_FOUND
    for methods, pattern, handler in ROUTES:
        if request.method in methods and pattern.fullmatch(api.endpoint):
            found = handler(request, api)
            break
    return Answer(found.status, found.body, found.content_type, extra + found.headers, found.upgrade)
