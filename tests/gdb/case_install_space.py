import os, subprocess, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

# redzone installed under a path with a space (`cmake --install --prefix "/.../my tools"`): the plugin of that
# install preloads its libredzone.so into the program (rz-exec puts the library's folder on LD_LIBRARY_PATH
# and preloads it by name; ld.so splits LD_PRELOAD on spaces), and the program is checked.
# Names here are globals of gdb's __main__, which the auto-loaded scripts of the program's libraries share: the
# ASan tree's program loads libstdc++, whose printers' script sets `prefix` (to '/usr/'), so no such name here.
BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(PLUGIN))))
with tempfile.TemporaryDirectory() as scratch:
    install_prefix = os.path.join(scratch, "my tools")
    p = subprocess.run(["cmake", "--install", BUILD, "--prefix", install_prefix], capture_output=True, text=True)
    check(p.returncode == 0, f"cmake --install: {p.stdout}{p.stderr}")
    plugin = os.path.join(install_prefix, "share", "redzone", "gdb", "redzone.py")
    ex("set pagination off")
    ex("set confirm off")
    ex(f"source {plugin}")
    from redzone_gdb import paths  # noqa: E402
    check(" " in paths.LIBREDZONE and paths.LIBREDZONE.startswith(install_prefix), paths.LIBREDZONE)
    ex("set redzone emulated-device on")
    ex(f"file {PROG}")
    ex("break stop_here")
    said = go("run overrun")
    check("not loaded" not in said, f"the plugin warned at run: {said}")
    libs = [o.filename for o in gdb.objfiles() if "libredzone.so" in (o.filename or "")]
    check(libs and all(l.startswith(install_prefix) for l in libs), f"the installed library is in the program: {libs} (install_prefix {install_prefix!r})")
    out = ex("redzone scan")
    check("REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64" in out, out)
    ex("kill")
    # The installed launcher too, with this debugger: -iex add-auto-load-safe-path and -ex source take the
    # folder with its space, so the stub next to the library is trusted and no auto-load warning appears.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "PYTHONPATH")}
    p = subprocess.run([os.path.join(install_prefix, "bin", "redzone"), "gdb", "--emulated-device", "--gdb",
                        os.environ["RZ_DEBUGGER"], "--", "-batch", "-ex", "break stop_here", "-ex", "run overrun",
                        "-ex", "redzone scan", "-ex", "kill", "--", PROG], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, env=env, timeout=240)
    out = p.stdout + p.stderr
    declined = [l for l in out.splitlines() if "auto-loading has been declined" in l and "libredzone" in l]
    check(p.returncode == 0 and "REDZONE VIOLATION alloc#1 user_bytes=1000 pad=64" in out and "not loaded" not in out
          and not declined, f"installed launcher: {p.returncode} {out}")
# A ':' in the library's path: no spelling reaches ld.so intact, so rz-exec refuses to start the program
# with a sentence (status 127) rather than run it without red zones.
p = subprocess.run([os.path.join(BUILD, "native", "rz-exec"), "--preload", "/opt/my:tools/lib/libredzone.so", "--",
                    "true"], capture_output=True, text=True)
check(p.returncode == 127 and "contains ':', which LD_PRELOAD and LD_LIBRARY_PATH cannot hold, so the program would "
      "run without red zones" in p.stderr, f"{p.returncode} {p.stderr}")
done()
