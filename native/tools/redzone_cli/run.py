"""`redzone run`: the program with libredzone.so preloaded, its exit status passed on (or --error-exitcode
when violations were found), signals sent to the launcher forwarded to it."""
import errno
import os
import re
import stat
import sys
import tempfile

from . import options, paths, procs
from .options import Failure, UsageError

DESCRIPTION = """\
Runs PROGRAM with libredzone.so preloaded (into PROGRAM itself, not a shell). Every device allocation
the program makes (driver API, or cudaMalloc through the runtime) gets a trailing guard band; bands are
checked when a buffer is freed and at exit (see --scan), and every write past the end is reported:

  REDZONE VIOLATION alloc#<idx> user_bytes=<n> pad=<p> : bytes [<first>..=<last>] past the end were
  written (<changed> of <p> pad bytes changed), first bad value 0x<hh>

Options map to METRALE_REDZONE* environment variables; an option wins over the variable set in the
environment (as in redzone bisect). Values are checked by the library's own rules before the program
starts. Red zones are on at 64 bytes unless told otherwise.

--unpool makes the frameworks that pool device memory (PyTorch, JAX/XLA, TensorFlow) allocate buffer by
buffer, so each tensor gets its own band (docs/frameworks.md; CuPy and RMM choose their allocator in code).

Exit status: the program's (128+N if it died of signal N, or when the launcher got signal N and passed it
on), or the --error-exitcode value when violations were found; 2: usage error; 127: PROGRAM could not be
started."""


# --unpool: the environment variables that make each framework allocate buffer by buffer (docs/frameworks.md).
UNPOOL_ENV = (
    ("PYTORCH_NO_CUDA_MEMORY_CACHING", "1"),      # PyTorch: cudaMalloc/cudaFree per tensor, no caching
    ("XLA_PYTHON_CLIENT_ALLOCATOR", "platform"),  # JAX/XLA: allocate and free on demand, no preallocation
    ("TF_GPU_ALLOCATOR", "cuda_malloc_async"),     # TensorFlow: cudaMallocAsync per buffer, not its BFC pool
)


def unpool(env):
    """Sets UNPOOL_ENV in the program's environment and says so in one line."""
    for var, value in UNPOOL_ENV:
        env[var] = value
    print("redzone run: --unpool: " + " ".join(f"{k}={v}" for k, v in UNPOOL_ENV) + " set for the program "
          "(CuPy and RMM pools are chosen in code: docs/frameworks.md)", file=sys.stderr, flush=True)


def driver_loads(env):
    """Whether the loader finds a CUDA driver (libcuda.so.1) with the program's library path: asked of a
    child, so the launcher never loads one itself."""
    import subprocess
    probe = "import ctypes,sys\ntry:\n ctypes.CDLL('libcuda.so.1')\nexcept OSError:\n sys.exit(1)"
    plain = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
    try:
        return subprocess.run([sys.executable, "-c", probe], env=plain, capture_output=True).returncode == 0
    except OSError:
        return True  # cannot tell: no hint rather than a wrong one


def summary_lines(path):
    try:
        with open(path, errors="replace") as f:
            return [line for line in f if "violations=" in line]
    except FileNotFoundError:
        return []


def violations_in(lines):
    return sum(int(m.group(1)) for m in (re.search(r"violations=(\d+)", x) for x in lines) if m)


def _refused(owner, directory):
    """The kernel's fs.protected_symlinks / protected_regular rule, as the library applies it (safeopen.c):
    in a sticky world-writable directory, a link or file another user owns there is not used."""
    sticky_world_writable = directory.st_mode & stat.S_ISVTX and directory.st_mode & stat.S_IWOTH
    return bool(sticky_world_writable) and owner not in (os.geteuid(), directory.st_uid)


def open_own_file(path):
    """A file descriptor for appending to path as the library opens its own files: created 0600, never
    through a symlink nor into a file another user owns in a sticky world-writable directory (/tmp)."""
    head, base = os.path.split(path)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
    dfd = os.open(head or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        directory = os.fstat(dfd)
        try:
            return os.open(base, flags | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dfd)
        except FileExistsError:
            pass
        try:
            fd = os.open(base, flags, dir_fd=dfd)
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise
            link = os.stat(base, dir_fd=dfd, follow_symlinks=False)
            if _refused(link.st_uid, directory):
                raise PermissionError(errno.EACCES, "a symlink another user owns in a sticky world-writable "
                                      "directory, not followed") from None
            return os.open(base, (flags & ~os.O_NOFOLLOW) | os.O_CREAT, 0o600, dir_fd=dfd)
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and _refused(st.st_uid, directory):
            os.close(fd)
            raise PermissionError(errno.EACCES, "a file another user owns in a sticky world-writable directory, "
                                  "not opened")
        return fd
    finally:
        os.close(dfd)


def keep_user_summary(user_path, lines):
    """The user's own METRALE_REDZONE_SUMMARY gets the lines it would have got without the launcher."""
    for line in lines:
        m = re.match(r"pid=(\d+)", line)
        path = user_path.replace("%p", m.group(1)) if m else user_path
        try:
            with os.fdopen(open_own_file(path), "a") as f:
                f.write(line)
        except OSError as e:
            print(f"redzone: cannot append to METRALE_REDZONE_SUMMARY={user_path!r}: {e.strerror}", file=sys.stderr)
            return


def cmd_run(args, program):
    user_summary = os.environ.get("METRALE_REDZONE_SUMMARY") or None
    env, origin = options.program_env(args, [o.flag for o in options.run_options()], args.emulated_device)
    options.check_values(env, origin, "run")
    if args.unpool:
        unpool(env)
    # libredzone.so is also the program's NVTX injection library (pool regions: docs/design.md), unless the
    # user named another one.
    env.setdefault("NVTX_INJECTION64_PATH", paths.LIBREDZONE)
    if user_summary:
        user_summary = env["METRALE_REDZONE_SUMMARY"]  # made absolute
    fd, summary_path = tempfile.mkstemp(prefix="redzone-summary-")
    os.close(fd)
    try:
        env["METRALE_REDZONE_SUMMARY"] = summary_path
        try:
            code, forwarded = procs.run_forwarding(program, env)
        except OSError as e:
            raise Failure(f"redzone: cannot run {program[0]}: {e.strerror}", 127) from None
        lines = summary_lines(summary_path)
    finally:
        os.unlink(summary_path)
    if user_summary:
        keep_user_summary(user_summary, lines)
    if forwarded is not None:
        return code if code > 128 else 128 + forwarded
    if code == 127 and not lines and not args.emulated_device and not driver_loads(env):
        # The loader's "libcuda.so.1: cannot open shared object file" (or a program's own exit 127).
        print(f"redzone run: {os.path.basename(program[0])} exited with status 127 and no CUDA driver "
              "(libcuda.so.1) can be loaded here: on a machine without a GPU, add --emulated-device",
              file=sys.stderr)
    if args.error_exitcode is not None:
        if violations_in(lines) > 0:
            return args.error_exitcode
        if not lines:
            print("redzone run: --error-exitcode not applied: no allocation counted (none made, or _exit, exec "
                  "or a signal)", file=sys.stderr)
    return code


__all__ = ["cmd_run", "DESCRIPTION", "UsageError"]
