"""The Nsight Systems SQLite export schema the generator writes: tables, columns and types in the
order of a real 3.25 export, GPU and product facts for TARGET_INFO_GPU and META_DATA_EXPORT."""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Callable
from typing import Protocol


class TargetSpec(Protocol):
    """What ``write_target_info`` reads of an export's spec (``generate.ExportSpec`` has it; named here, not
    imported, so the schema does not depend on the generator that uses it)."""

    n_gpus: int
    gpu_model: str
    schema_version: str
    seed: int

VM_BITS = 1 << 48  # the constant high part real exports carry (hwId 0, vmId 1)
BATCH = 50_000


def global_pid(pid: int) -> int:
    """Serialized GlobalId of a process, as nsys writes it: ``(1 << 48) | (pid << 24)``."""
    return VM_BITS | (pid << 24)


def global_tid(pid: int, tid: int) -> int:
    return global_pid(pid) | tid


# ---- schema: (name, type, NOT NULL) in the order of the real export -----------------------------
def cols(spec: str) -> list[tuple[str, str, bool]]:
    types = {"I": "INTEGER", "T": "TEXT", "R": "REAL"}
    out = []
    for item in spec.split():
        name, t = item.split(":")
        out.append((name, types[t[0]], t.endswith("!")))
    return out


SCHEMA: dict[str, list[tuple[str, str, bool]]] = {k: cols(v) for k, v in {
    "StringIds": "id:I! value:T!",
    "TARGET_INFO_SESSION_START_TIME": "utcEpochNs:I utcTime:T localTime:T systemClockNs:I",
    "TARGET_INFO_GPU": "vmId:I! id:I! name:T busLocation:T isDiscrete:I l2CacheSize:I totalMemory:I "
        "memoryBandwidth:I clockRate:I smCount:I pwGpuId:I uuid:T luid:I chipName:T cuDevice:I "
        "ctxswDevPath:T ctrlDevPath:T revision:I nodeMask:I constantMemory:I maxIPC:I maxRegistersPerBlock:I "
        "maxShmemPerBlock:I maxShmemPerBlockOptin:I maxShmemPerSm:I maxRegistersPerSm:I threadsPerWarp:I "
        "asyncEngines:I maxWarpsPerSm:I maxBlocksPerSm:I maxThreadsPerBlock:I maxBlockDimX:I maxBlockDimY:I "
        "maxBlockDimZ:I maxGridDimX:I maxGridDimY:I maxGridDimZ:I computeMajor:I computeMinor:I smMajor:I "
        "smMinor:I",
    "PROCESSES": "globalPid:I pid:I name:T",
    "ThreadNames": "nameId:I! priority:I globalTid:I",
    "TARGET_INFO_CUDA_STREAM": "streamId:I! hwId:I! vmId:I! processId:I! contextId:I! priority:I! flag:I!",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "start:I! end:I! eventClass:I! globalTid:I correlationId:I nameId:I! "
        "returnValue:I! callchainId:I",
    "CUPTI_ACTIVITY_KIND_KERNEL": "start:I! end:I! deviceId:I! contextId:I! greenContextId:I streamId:I! "
        "correlationId:I globalPid:I demangledName:I! shortName:I! mangledName:I launchType:I cacheConfig:I "
        "registersPerThread:I! gridX:I! gridY:I! gridZ:I! blockX:I! blockY:I! blockZ:I! "
        "staticSharedMemory:I! dynamicSharedMemory:I! localMemoryPerThread:I! localMemoryTotal:I! gridId:I! "
        "sharedMemoryExecuted:I graphNodeId:I sharedMemoryLimitConfig:I qmdBulkReleaseDone:I "
        "qmdPreexitDone:I qmdLastCtaDone:I graphId:I clusterX:I clusterY:I clusterZ:I "
        "clusterSchedulingPolicy:I maxPotentialClusterSize:I maxActiveClusters:I "
        "sharedMemoryRequestedPercentage:I tensorSizeMinusOneElements:T!",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "start:I! end:I! deviceId:I! contextId:I! greenContextId:I streamId:I! "
        "correlationId:I globalPid:I bytes:I! copyKind:I! deprecatedSrcId:I srcKind:I dstKind:I "
        "srcDeviceId:I srcContextId:I dstDeviceId:I dstContextId:I migrationCause:I graphNodeId:I "
        "virtualAddress:I copyCount:I",
    "CUPTI_ACTIVITY_KIND_MEMSET": "start:I! end:I! deviceId:I! contextId:I! greenContextId:I streamId:I! "
        "correlationId:I globalPid:I value:I! bytes:I! graphNodeId:I memKind:I",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": "start:I! end:I! deviceId:I! contextId:I! greenContextId:I "
        "streamId:I! correlationId:I globalPid:I deprecatedSyncType:I syncType:I! eventId:I! eventSyncId:I",
    "NVTX_EVENTS": "start:I! end:I eventType:I! rangeId:I category:I color:I text:T globalTid:I "
        "endGlobalTid:I textId:I domainId:I uint64Value:I int64Value:I doubleValue:R uint32Value:I "
        "int32Value:I floatValue:R jsonTextId:I jsonText:T binaryData:T",
    "META_DATA_EXPORT": "name:T! value:T",
}.items()}


# The capture's settings and session (``readers.nsys_capture``), as the fixed-work generator writes them.
SESSION_SCHEMA: dict[str, list[tuple[str, str, bool]]] = {
    "ANALYSIS_DETAILS": cols("globalVid:I! duration:I! startTime:I! stopTime:I!"),
    "META_DATA_CAPTURE": cols("name:T! value:T"),
}


def ddl(table: str) -> str:
    body = ",\n".join(f"    {n:<27} {t:<9}" + (" NOT NULL" if nn else "") + (" PRIMARY KEY" if n == "id" and
                      table == "StringIds" else "") for n, t, nn in {**SCHEMA, **SESSION_SCHEMA}[table])
    return f"CREATE TABLE {table} (\n{body}\n)"


GPUS = {  # name -> (chip, l2, totalMemory, bandwidth, clock, SMs, shmemOptin, shmemPerSm, engines, cc)
    "NVIDIA H100 80GB HBM3":
        ("GH100", 52428800, 85045477376, 3352320000000, 1980000000, 132, 232448, 233472, 3, 9.0),
    "NVIDIA H200":
        ("GH100", 62914560, 150121545728, 4916736000000, 1980000000, 132, 232448, 233472, 3, 9.0),
    "NVIDIA A100-SXM4-80GB":
        ("GA100", 41943040, 84990623744, 2039040000000, 1410000000, 108, 166912, 167936, 5, 8.0),
}
PRODUCT = {"3.25.0": "2026.2.1.210", "3.17.1": "2025.1.1.110", "3.13.2": "2024.5.1.113",
            "3.11.1": "2024.2.1.106"}



def crc(s: str) -> int:
    return zlib.crc32(s.encode())


def write_target_info(conn: sqlite3.Connection, ins: Callable, spec: TargetSpec) -> None:
    chip, l2, mem, bw, clock, sms, optin, per_sm, engines, cc = GPUS.get(spec.gpu_model,
                                                                          GPUS["NVIDIA H100 80GB HBM3"])
    major, minor = int(cc), int(round(cc * 10)) % 10
    ins("TARGET_INFO_GPU", [(VM_BITS, r, spec.gpu_model, f"0000:{0x18 + 0x10 * r:02x}:00.0", 1, l2, mem, bw,
                             clock, sms, r,
                             "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}".format(
                                 crc(f"{spec.seed}/{r}"), r, 0x4000 | r, 0x8000,
                                 crc(spec.gpu_model) * 4096 + r),
                             0, chip, r, None, None, 161, 0, 65536, 0, 65536, 49152, optin, per_sm, 65536, 32,
                             engines, 64, 32, 1024, 1024, 1024, 64, 2147483647, 65535, 65535, major, minor,
                             major, minor) for r in range(spec.n_gpus)])
    utc = 1_779_630_014_975_716_426 + spec.seed * 1_000_000_000
    ins("TARGET_INFO_SESSION_START_TIME",
        [(utc, "2026-05-24T13:40:14", "2026-05-24T13:40:14", 35_255_823_190)])
    product = PRODUCT.get(spec.schema_version, "2026.2.1.210")
    major_s, minor_s, micro_s = (spec.schema_version.split(".") + ["0", "0"])[:3]
    ins("META_DATA_EXPORT", [
        ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"), ("EXPORT_PRODUCT_VERSION", product),
        ("EXPORT_PRODUCT_DATE", ".".join(product.split(".")[:2])),
        ("EXPORT_SCHEMA_VERSION", spec.schema_version), ("EXPORT_SCHEMA_VERSION_MAJOR", major_s),
        ("EXPORT_SCHEMA_VERSION_MINOR", minor_s), ("EXPORT_SCHEMA_VERSION_MICRO", micro_s),
        ("EXPORT_PLATFORM", "linux-desktop"), ("EXPORT_ARCH", "x64"),
        ("EXPORT_TIME_UTC", "2026-05-24T13:51:31"), ("EXPORT_PARAM_EXPORT_TYPE", "SQLite"),
        ("EXPORT_PARAM_TIME_NORMALIZE", "false"), ("EXPORT_PARAM_TIME_SHIFT", "0"),
        ("DERIVED_BY", "kbase.generate")])


