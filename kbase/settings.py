"""One ``Settings`` object per command: defaults, then ``[tool.kbase]`` and ``[tool.kbase.gate]`` in the
project's ``pyproject.toml``, then the environment, then flags — merged once and passed down.

Example::

    [tool.kbase]
    db = ".kbase/kbase.db"          # or a postgresql:// URL
    profile = "out/train.sqlite"    # what a bare `kbase snapshot` reads
    gpu_model = "Tesla V100-SXM2-32GB"  # the GPU of captures that do not name it (kbase snapshot --gpu-model)
    name = "train-8gpu"              # the workload (default: the store's only one)
    marker = "^ProfilerStep#"
    warmup = 2
    gpu_hour_cost = 6.77             # price of one GPU-hour: diff and gate state a change's cost per month
    gpus = 8                         # the fleet that runs this job (GPUs, around the clock)

    [tool.kbase.gate]
    max_increase_pct = 5.0
    ignore = ["*memcpy*"]

Environment: ``KBASE_DB`` (store URL or path), ``KBASE_NAME`` (the workload), ``KBASE_BUSY_TIMEOUT``
(seconds SQLite waits for another writer), ``KBASE_CONNECT_TIMEOUT`` (seconds a PostgreSQL connection may take
to open, unless the URL's own ``connect_timeout`` says), ``KBASE_GPU_HOUR_COST`` and ``KBASE_GPUS`` (the cost
line), ``KBASE_GPU_MODEL`` (the GPU of a capture that does not name it). Every value records where it came from
(``origins``), so an error can name the flag, the ``pyproject.toml`` key or the variable that holds it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from kbase.analysis.cost import Pricing
from kbase.analysis.spec import WindowSpec
from kbase.errors import SettingsError
from kbase.policy import ComparisonPolicy, Policy, load_policy

DEFAULT_WORKLOAD = "default"
DEFAULT_BUSY_TIMEOUT_S = 30.0
DEFAULT_CONNECT_TIMEOUT_S = 10.0  # a PostgreSQL server that does not answer: the command fails after this
WINDOW_KEYS: dict[str, type] = {"marker": str, "iteration_kernel": str, "iterations": str, "warmup": int,
                                "gpu": int, "trim": list, "allow_missing_ranks": bool}
TOP_KEYS: dict[str, type] = {"db": str, "profile": str, "name": str, "gate": dict, "gpu_hour_cost": float,
                             "gpus": int, "currency": str, "import_max_mb": int, "cache_max_mb": int,
                             "gpu_model": str, **WINDOW_KEYS}
ENV_VARS = {"db": "KBASE_DB", "name": "KBASE_NAME", "busy_timeout_s": "KBASE_BUSY_TIMEOUT",
            "connect_timeout_s": "KBASE_CONNECT_TIMEOUT",
            "nsys_timeout_s": "KBASE_NSYS_TIMEOUT", "gpu_hour_cost": "KBASE_GPU_HOUR_COST", "gpus": "KBASE_GPUS",
            "import_max_mb": "KBASE_IMPORT_MAX_MB", "cache_max_mb": "KBASE_CACHE_MAX_MB",
            "gpu_model": "KBASE_GPU_MODEL"}
# What one export file may hold and decode to (kbase import): the largest real baseline is a few MiB decoded;
# a decompression bomb in the data branch must not take the CI runner's memory
DEFAULT_IMPORT_MAX_MB = 64
MAX_IMPORT_MAX_MB = 1 << 20  # a mebibyte count past this (1 TiB) is a typo, and overflows nothing below
# The top cache (``store.top_cache``: ``kbase top FILE`` answered again without reading the file): its size cap,
# least recently used entries evicted past it; 0 turns it off. A 2,000-kernel leaderboard is ~0.3 MiB there.
DEFAULT_CACHE_MAX_MB = 64
DEFAULT_NSYS_TIMEOUT_S = 1800.0  # exporting a multi-GB report takes minutes; a hung nsys must not hang CI


class Origin(StrEnum):
    DEFAULT = "default"
    CONFIG = "config"  # [tool.kbase] in pyproject.toml
    ENV = "env"
    FLAG = "flag"
    STORE = "store"  # the workload: the store's only one, none being named


@dataclass(frozen=True)
class Settings:
    root: Path  # the project: git top level (or the current directory)
    repo: Path | None = None  # the git repository given (None: the current directory's)
    pyproject: Path | None = None  # the file [tool.kbase] came from
    db: str | None = None  # store URL or path as given (None: the default store under root)
    workload: str = DEFAULT_WORKLOAD
    profile: Path | None = None
    window: WindowSpec = field(default_factory=WindowSpec)
    policy: Policy = field(default_factory=Policy)
    busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    nsys_timeout_s: float = DEFAULT_NSYS_TIMEOUT_S
    pricing: Pricing | None = None  # gpu_hour_cost and gpus: the cost line of diff and gate (None: not stated)
    import_max_mb: int = DEFAULT_IMPORT_MAX_MB  # per export file, read and decoded (kbase import)
    # the GPU model of a capture that does not name it (no deviceProperties / TARGET_INFO_GPU): read as "unknown",
    # which compares with no other baseline (``api.capture.read`` puts this in its place)
    gpu_model: str | None = None
    cache_max_mb: int = DEFAULT_CACHE_MAX_MB  # the top cache's size cap (0: off)
    origins: Mapping[str, Origin] = field(default_factory=dict)

    @classmethod
    def load(cls, *, repo: Path | str | None = None, environ: Mapping[str, str] | None = None,
             db: str | None = None, name: str | None = None, profile: Path | str | None = None,
             window: Mapping[str, Any] | None = None, policy: Mapping[str, Any] | None = None,
             gpu_hour_cost: float | None = None, gpus: int | None = None,
             gpu_model: str | None = None) -> Settings:
        """Merge every layer. ``window`` and ``policy`` hold flag values; ``None`` values are unset."""
        repo_path = Path(repo) if repo is not None else None
        root = find_project_root(repo_path)
        cfg, pyproject = load_tool_config(root)
        env = os.environ if environ is None else environ
        origins: dict[str, Origin] = {}

        def pick(key: str, flag: Any, config_key: str | None = None, env_var: str | None = None) -> Any:
            if flag is not None:
                origins[key] = Origin.FLAG
                return flag
            if env_var and env.get(env_var):
                origins[key] = Origin.ENV
                return env[env_var]
            ck = config_key or key
            if ck in cfg:
                origins[key] = Origin.CONFIG
                return cfg[ck]
            origins[key] = Origin.DEFAULT
            return None

        db_value = pick("db", db, env_var="KBASE_DB")
        if origins["db"] == Origin.CONFIG:
            db_value = _relative_to(str(db_value), root)
        workload = pick("name", name, env_var="KBASE_NAME") or DEFAULT_WORKLOAD
        prof = pick("profile", profile)
        prof_path = (root / prof if origins["profile"] == Origin.CONFIG else Path(prof)) if prof is not None else None
        flags = dict(window or {})
        values = {key: pick(key, flags.get(key)) for key in WINDOW_KEYS}
        trim = values["trim"]
        spec = WindowSpec(marker=values["marker"], iteration_kernel=values["iteration_kernel"],
                          iterations=values["iterations"], warmup=values["warmup"],
                          trim=(float(trim[0]), float(trim[1])) if trim else None, gpu=values["gpu"],
                          allow_missing_ranks=bool(values["allow_missing_ranks"]))
        try:
            _check_window(spec, origins)
            pricing = _pricing(pick("gpu_hour_cost", gpu_hour_cost, env_var="KBASE_GPU_HOUR_COST"),
                               pick("gpus", gpus, env_var="KBASE_GPUS"), cfg.get("currency"))
            import_max = pick("import_max_mb", None, env_var="KBASE_IMPORT_MAX_MB")
            import_mb = _mebibytes(import_max, "import_max_mb") if import_max is not None else DEFAULT_IMPORT_MAX_MB
            model = _gpu_model(pick("gpu_model", gpu_model, env_var="KBASE_GPU_MODEL"))
            cache_max = pick("cache_max_mb", None, env_var="KBASE_CACHE_MAX_MB")
            cache_mb = (_mebibytes(cache_max, "cache_max_mb", lowest=0) if cache_max is not None
                        else DEFAULT_CACHE_MAX_MB)
        except SettingsError as exc:  # name the value as the user gave it: flag, variable or pyproject.toml key
            exc.loading = cls(root=root, repo=repo_path, pyproject=pyproject, origins=origins)
            raise
        timeout = pick("busy_timeout_s", None, env_var="KBASE_BUSY_TIMEOUT")
        busy = _positive_seconds(timeout, "busy_timeout_s") if timeout is not None else DEFAULT_BUSY_TIMEOUT_S
        connect = pick("connect_timeout_s", None, env_var="KBASE_CONNECT_TIMEOUT")
        connect_s = (_positive_seconds(connect, "connect_timeout_s", allow_zero=False) if connect is not None
                     else DEFAULT_CONNECT_TIMEOUT_S)
        nsys = pick("nsys_timeout_s", None, env_var="KBASE_NSYS_TIMEOUT")
        nsys_s = (_positive_seconds(nsys, "nsys_timeout_s", allow_zero=False) if nsys is not None
                  else DEFAULT_NSYS_TIMEOUT_S)
        where = f"{pyproject} [tool.kbase.gate]" if pyproject else "[tool.kbase.gate]"
        gate_policy = load_policy(cfg.get("gate"), dict(policy or {}), where=where)
        return cls(root=root, repo=repo_path, pyproject=pyproject, db=db_value, workload=str(workload),
                   profile=prof_path, window=spec, policy=gate_policy, busy_timeout_s=busy, connect_timeout_s=connect_s,
                   nsys_timeout_s=nsys_s, pricing=pricing, import_max_mb=import_mb, cache_max_mb=cache_mb,
                   gpu_model=model, origins=origins)

    def comparison_policy(self) -> ComparisonPolicy:
        """The part of these settings the comparison uses (``kbase.comparison`` never sees ``Settings``)."""
        return ComparisonPolicy(gate=self.policy, pricing=self.pricing)

    def with_window(self, spec: WindowSpec) -> Settings:
        return replace(self, window=spec)

    def origin(self, key: str) -> Origin:
        return self.origins.get(key, Origin.DEFAULT)

    @property
    def workload_given(self) -> bool:
        """Whether the user named the workload (flag, ``KBASE_NAME``, ``[tool.kbase] name``, or a Settings built
        with one): otherwise a command that reads the store means its only workload (``api.common.workload_for``)."""
        return self.origin("name") != Origin.DEFAULT or self.workload != DEFAULT_WORKLOAD

    def store_url(self) -> str:
        """The store's SQLAlchemy URL: ``db`` as given, else ``.kbase/kbase.db`` under the project root."""
        from kbase.store_urls import normalize_url

        if self.db:
            return normalize_url(self.db)
        return f"sqlite:///{self.root / '.kbase' / 'kbase.db'}"


def _relative_to(value: str, root: Path) -> str:
    """A relative SQLite path in pyproject.toml is relative to the project, not the current directory."""
    if "://" in value:
        return value
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else root / p)


def _positive_seconds(value: Any, field: str, allow_zero: bool = True) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise SettingsError("must be a number of seconds", field=field, value=value) from None
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        raise SettingsError(f"must be a finite number of seconds {'>= 0' if allow_zero else '> 0'}", field=field,
                            value=value)
    return seconds


def _mebibytes(value: Any, field: str, lowest: int = 1) -> int:
    try:
        mb = int(value) if not isinstance(value, bool | float) else -1
    except (TypeError, ValueError):
        mb = -1
    if not lowest <= mb <= MAX_IMPORT_MAX_MB:
        raise SettingsError(f"must be a whole number of MiB from {lowest} to {MAX_IMPORT_MAX_MB}", field=field,
                            value=value)
    return mb


def _pricing(cost: Any, gpus: Any, currency: Any) -> Pricing | None:
    """The cost line's pricing: ``gpu_hour_cost`` and ``gpus`` both given (one alone is an error: a cost needs
    both), or neither (None: no cost line)."""
    price = None if cost is None else _price(cost)
    fleet = None if gpus is None else _fleet(gpus)
    if price is None and fleet is None:
        return None
    if price is None or fleet is None:
        given, missing = ("gpus", "gpu_hour_cost") if price is None else ("gpu_hour_cost", "gpus")
        raise SettingsError(f"a cost per month needs both gpu_hour_cost and gpus; {missing} is not set",
                            field=given, value=gpus if price is None else cost)
    return Pricing(gpu_hour_cost=price, gpus=fleet, currency=str(currency) if currency else "$")


def _price(cost: Any) -> float:
    try:
        price = float(cost)
    except (TypeError, ValueError):
        raise SettingsError("must be a price per GPU-hour (a number)", field="gpu_hour_cost", value=cost) from None
    if not math.isfinite(price) or price <= 0:
        raise SettingsError("must be a price per GPU-hour above 0", field="gpu_hour_cost", value=cost)
    return price


def _fleet(gpus: Any) -> int:
    try:
        fleet = int(gpus) if not isinstance(gpus, (bool, float)) else int(gpus) if float(gpus).is_integer() else -1
    except (TypeError, ValueError):
        fleet = -1
    if isinstance(gpus, bool) or fleet < 1:
        raise SettingsError("must be a whole number of GPUs, 1 or more", field="gpus", value=gpus)
    return fleet


def _check_window(spec: WindowSpec, origins: Mapping[str, Origin]) -> None:
    if spec.warmup is not None and spec.warmup < 0:
        raise SettingsError("must be 0 or more", field="warmup", value=spec.warmup)
    if spec.gpu is not None and spec.gpu < 0:
        raise SettingsError("must be 0 or more", field="gpu", value=spec.gpu)
    if spec.trim is not None:
        lo, hi = spec.trim
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise SettingsError("START and END must be finite seconds", field="trim", value=spec.trim)
    from kbase.analysis.spec import MAX_WINDOW_SPEC_BYTES

    size = len(spec.key().encode("utf-8", "surrogatepass"))
    if size > MAX_WINDOW_SPEC_BYTES:
        name = max(("marker", "iteration_kernel"), key=lambda f: len(getattr(spec, f) or ""))
        shown = (getattr(spec, name) or "")[:60] + "…"
        raise SettingsError(f"is too long: the window's description would be {size:,} bytes, over the "
                            f"{MAX_WINDOW_SPEC_BYTES:,} a store keeps", field=name, value=shown)


def find_project_root(start: Path | None = None) -> Path:
    """The git top level above ``start`` (or the current directory), else ``start`` itself."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / ".git").exists():
            return d
    return here


MAX_GPU_MODEL = 120  # characters of a GPU model name ("NVIDIA H100 80GB HBM3" is 21)


def _gpu_model(value: Any) -> str | None:
    """A GPU model name as given (``--gpu-model``, ``KBASE_GPU_MODEL``, ``[tool.kbase] gpu_model``): printable
    text without commas (the store keeps a capture's models comma-separated), not "unknown"."""
    if value is None:
        return None
    text = str(value).strip()
    if not text or len(text) > MAX_GPU_MODEL or "," in text or not text.isprintable() or text.lower() == "unknown":
        raise SettingsError(f"must name a GPU model, as nvidia-smi does (printable, no comma, at most "
                            f"{MAX_GPU_MODEL} characters; e.g. 'Tesla V100-SXM2-32GB')", field="gpu_model",
                            value=value)
    return text


def load_tool_config(root: Path) -> tuple[dict, Path | None]:
    """``[tool.kbase]`` of ``root/pyproject.toml``, checked key by key, and the file (None if absent)."""
    path = root / "pyproject.toml"
    if not path.is_file():
        return {}, None
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path}: malformed TOML ({exc})", path=path) from None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot be read ({exc.strerror})", path=path) from None
    tool = data.get("tool", {})
    cfg = tool.get("kbase", {}) if isinstance(tool, dict) else {}
    if not isinstance(cfg, dict):
        raise SettingsError(f"{path}: [tool.kbase] must be a table", path=path)
    for key, value in cfg.items():
        want = TOP_KEYS.get(key)
        if want is None:
            raise SettingsError(f"{path}: [tool.kbase] unknown key {key!r} (known: {', '.join(sorted(TOP_KEYS))})",
                                path=path)
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            continue  # gpu_hour_cost = 7 is a price too
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise SettingsError(f"{path}: [tool.kbase] {key} must be a {want.__name__}, got {value!r}", path=path)
    trim = cfg.get("trim")
    if trim is not None and (len(trim) != 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                       for x in trim)):
        raise SettingsError(f"{path}: [tool.kbase] trim must be [START, END] in seconds", path=path)
    return cfg, path
