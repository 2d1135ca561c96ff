#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Run a program in a QEMU guest of the initramfs alone, with a vmclock
device, and migrate the guest to a file and back if the program asks (a
console line "vmrun: migrate to a file and back").

QEMU's vmclock device (QEMU 10 and later) moves its disruption_marker
when a guest is loaded from a migration stream: the event a hypervisor
signals after a live migration.  A guest with a 9p share mounted cannot
migrate, so the program runs from the initramfs itself (guest-init.sh's
vmrun.local), static, with the modules it names loaded first.  QEMU and
the kernel come from a root of scripts/kernel-roots.sh (trixie's: QEMU 10,
kernels 7.x with the vmclock driver); QEMU runs there.

The initramfs is also the guest whose files a security module can label
(scripts/vm/run-in-vm.sh's guests run on a 9p share): selinux_test boots
here with --append lsm=... and its policy as a --file.

Usage: migrate_test.py --kernel RELEASE --program PATH [--module KO]...
                       [--kmod NAME]... [--file PATH:NAME]... [--append ARGS]
                       [--no-vmclock] [--smp N] [--log FILE] [--timeout SEC]
  --module: a module file to load (ours); --kmod: a module of the kernel's,
  with its dependencies; --file: PATH copied to /NAME in the initramfs;
  --append: more of the kernel's command line; --no-vmclock: no such
  device, and a kernel of this machine's, with its QEMU, where no root has
  it.  Exit: the program's status; 4 (a reason on stdout) if no root has
  the kernel or its QEMU no vmclock; 125 if the guest died, the migration
  failed, or the kernel log shows trouble.
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.realpath(__file__))
REPO = os.path.realpath(os.path.join(HERE, "..", ".."))
ROOTS = os.path.join(REPO, "scripts", "kernel-roots.sh")
ASK = "vmrun: migrate to a file and back"
# As run-in-vm.sh judges a guest's kernel log.
TROUBLE = re.compile(r"\[ *[0-9]+\.[0-9]+\].*(Kernel panic|BUG:|Oops|WARNING:|soft lockup|"
                     r"hard LOCKUP|rcu.*(stall|Stall)|blocked for more than)")


GUESTS = []  # the QEMU processes of this run, for what their programs said


def print_said():
    """The last lines the guest's program printed (its kernel's are in the log)."""
    for g in GUESTS:
        if g.p.poll() is not None:
            g.t.join(10)  # its console's last lines
    said = [ln for g in GUESTS for ln in g.lines if not ln.startswith("[")]
    for ln in said[-40:]:
        print(f"migrate_test: guest: {ln}", file=sys.stderr)


def die(msg, code=125):
    print_said()
    print(f"migrate_test: {msg}", file=sys.stderr)
    sys.exit(code)


def skip(msg):
    print(f"migrate_test: SKIP: {msg}", file=sys.stderr)
    sys.exit(4)


def in_root(root, *cmd):
    """cmd to run in root, a root of scripts/kernel-roots.sh, or here if root is "/"."""
    return list(cmd) if root == "/" else [ROOTS, "run", root, REPO, "--", *cmd]


def kernel_modules(root, release, names):
    """Paths of names and their dependencies, in load order; built-in ones left out."""
    moddir = os.path.join(root, "lib", "modules", release)
    with open(os.path.join(moddir, "modules.builtin")) as f:
        builtin = {os.path.basename(line.strip()) for line in f}
    deps = {}
    with open(os.path.join(moddir, "modules.dep")) as f:
        for line in f:
            mod, _, rest = line.partition(":")
            deps[re.sub(r"\.ko(\..*)?$", "", os.path.basename(mod))] = (mod, rest.split())
    order = []

    def visit(name):
        if f"{name}.ko" in builtin or any(name == n for n, _ in order):
            return
        if name not in deps:
            die(f"module {name} is neither built into {release} nor in {moddir}", 1)
        path, after = deps[name]
        for dep in reversed(after):
            visit(re.sub(r"\.ko(\..*)?$", "", os.path.basename(dep)))
        order.append((name, os.path.join(moddir, path)))

    for name in names:
        visit(name)
    return order


def initramfs(out, release, root, program, modules, kmods, files):
    """The harness's initramfs, and an archive after it with the program, modules and files."""
    base = out + ".base"
    subprocess.run([os.path.join(HERE, "mkinitramfs.sh"), release, base, root], check=True)
    with tempfile.TemporaryDirectory() as stage:
        os.chmod(stage, 0o755)  # the guest's /, after the base archive's: not 0700
        os.makedirs(os.path.join(stage, "modules"))
        shutil.copy(program, os.path.join(stage, os.path.basename(program)))
        for spec in files:
            path, colon, name = spec.rpartition(":")
            if not colon:
                path, name = spec, os.path.basename(spec)
            shutil.copy(path, os.path.join(stage, name))
        names = []
        # busybox insmod cannot read compressed modules: stored plain.
        unpack = {".xz": ["xz", "-dc"], ".zst": ["zstd", "-qdc"], ".gz": ["gzip", "-dc"]}
        for name, path in kernel_modules(root, release, kmods):
            with open(os.path.join(stage, "modules", name + ".ko"), "wb") as f:
                ext = os.path.splitext(path)[1]
                if ext in unpack:
                    subprocess.run(unpack[ext] + [path], stdout=f, check=True)
                else:
                    with open(path, "rb") as src:
                        shutil.copyfileobj(src, f)
            names.append(name)
        for path in modules:
            name = os.path.basename(path)[:-3]
            shutil.copy(path, os.path.join(stage, "modules", name + ".ko"))
            names.append(name)
        with open(os.path.join(stage, "modules", "local.order"), "w") as f:
            f.write("".join(n + "\n" for n in names))
        files = subprocess.run("find . | LC_ALL=C sort", shell=True, cwd=stage, check=True,
                               capture_output=True).stdout
        extra = subprocess.run(["busybox", "cpio", "-o", "-H", "newc"], cwd=stage, input=files,
                               check=True, capture_output=True).stdout
    with open(out, "wb") as f, open(base, "rb") as b:
        # The kernel unpacks archives one after another, later files over earlier.
        shutil.copyfileobj(b, f)
        f.write(subprocess.run(["gzip", "-1"], input=extra, check=True,
                               capture_output=True).stdout)
    os.unlink(base)


class Monitor:
    """QEMU's human monitor on a unix socket, once guest's QEMU has made it."""

    def __init__(self, path, guest, deadline):
        while True:
            try:
                self.s = socket.socket(socket.AF_UNIX)
                self.s.settimeout(30)
                self.s.connect(path)
                break
            except OSError:
                self.s.close()
                if guest.p.poll() is not None:
                    die(f"qemu exited {guest.p.returncode} before its monitor answered")
                if time.monotonic() > deadline:
                    die(f"timeout: no monitor at {path}")
                time.sleep(0.2)
        self.read()  # the banner and its prompt

    def read(self):
        seen = b""
        while not seen.endswith(b"(qemu) "):
            data = self.s.recv(4096)
            if not data:
                break
            seen += data
        return seen.decode(errors="replace")

    def cmd(self, line):
        self.s.sendall(line.encode() + b"\n")
        return self.read()


class Guest:
    """One QEMU process, its console into the log; seen: the lines so far."""

    def __init__(self, root, argv, log):
        self.root = root
        self.p = subprocess.Popen(in_root(root, *argv),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        self.lines = []
        self.t = threading.Thread(target=self.pump, args=(log,), daemon=True)
        self.t.start()

    def pump(self, log):
        for raw in self.p.stdout:
            line = raw.decode(errors="replace").rstrip("\r\n")
            self.lines.append(line)
            print(line, flush=True)
            try:
                log.write(line + "\n")
                log.flush()
            except ValueError:  # closed: the run is over, its verdict taken
                pass

    def wait(self, timeout):
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, 9)
            self.p.wait()
            return None
        self.t.join(10)
        return self.p.returncode

    def kill(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, 9)
            self.p.wait()


def wait_for(cond, deadline, what):
    while not cond():
        if time.monotonic() > deadline:
            die(f"timeout: {what}")
        time.sleep(0.2)


def migrate(src, work, state, argv, log, deadline):
    """The guest that asked, to a file and back: the loaded guest's QEMU status, or None."""
    mon = Monitor(f"{work}/mon-src", src, deadline)
    print(f"migrate_test: migrating the guest to {state}", flush=True)
    mon.cmd(f"migrate -d file:{state}")
    status = ""
    while "completed" not in status:
        if time.monotonic() > deadline or "failed" in status:
            die(f"the migration did not complete: {status.strip()}")
        time.sleep(0.5)
        status = next((ln for ln in mon.cmd("info migrate").splitlines()
                       if ln.startswith("Migration status") or ln.startswith("Status")), "")
    mon.cmd("quit")
    src.wait(60)
    print("migrate_test: the source is gone; loading the guest from the file", flush=True)
    dst = Guest(src.root, argv + ["-monitor", f"unix:{work}/mon-dst,server=on,wait=off",
                                  "-incoming", f"file:{state}"], log)
    GUESTS.append(dst)
    mon = Monitor(f"{work}/mon-dst", dst, deadline)
    while "running" not in mon.cmd("info status"):
        if dst.p.poll() is not None or time.monotonic() > deadline:
            break
        if "paused" in mon.cmd("info status"):
            mon.cmd("cont")
        time.sleep(0.5)
    return dst.wait(max(1, deadline - time.monotonic()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--program", required=True)
    ap.add_argument("--module", action="append", default=[])
    ap.add_argument("--kmod", action="append", default=[])
    ap.add_argument("--file", action="append", default=[])
    ap.add_argument("--append", default="")
    ap.add_argument("--no-vmclock", action="store_true")
    ap.add_argument("--smp", type=int, default=1)
    ap.add_argument("--log")
    ap.add_argument("--timeout", type=int, default=900)
    a = ap.parse_args()

    r = subprocess.run([ROOTS, "root", a.kernel], capture_output=True, text=True)
    if not r.returncode:
        root = r.stdout.split()[0]
    elif a.no_vmclock and os.path.exists(f"/boot/vmlinuz-{a.kernel}"):
        root = "/"  # this machine's kernel, and its QEMU
    else:
        skip(f"no root of scripts/kernel-roots.sh has kernel {a.kernel}")
    q = subprocess.run(in_root(root, "sh", "-c", "qemu-system-x86_64 -device help"),
                       capture_output=True, text=True)
    if not a.no_vmclock and '"vmclock"' not in q.stdout:
        skip(f"the QEMU of {root} has no vmclock device (QEMU 10 has; kernel-roots.sh update installs it)")

    work = os.path.join(REPO, "build", "vm", f"migrate.{os.getpid()}")
    os.makedirs(work)
    log_path = a.log or os.path.join(REPO, "build", "vm", "migrate.log")
    initrd = os.path.join(work, "initramfs.cpio.gz")
    state = os.path.join(work, "state")
    argv = ["qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-smp", str(a.smp), "-m", "512",
            "-nographic", "-no-reboot", "-nic", "none",
            "-device", "isa-debug-exit,iobase=0x501,iosize=0x01",
            *([] if a.no_vmclock else ["-device", "vmclock"]),
            "-kernel", f"/boot/vmlinuz-{a.kernel}", "-initrd", initrd,
            # run-in-vm.sh's command line, and why it has tsc=nowatchdog.
            "-append", "console=ttyS0 panic=-1 oops=panic printk.time=1 tsc=nowatchdog "
                       f"vmrun.local=/{os.path.basename(a.program)} {a.append}"]
    deadline = time.monotonic() + a.timeout
    guests = GUESTS
    try:
        initramfs(initrd, a.kernel, root, a.program, a.module, a.kmod, a.file)
        with open(log_path, "w") as log:
            src = Guest(root, argv + ["-monitor", f"unix:{work}/mon-src,server=on,wait=off"], log)
            guests.append(src)
            wait_for(lambda: any(ASK in ln for ln in src.lines) or src.p.poll() is not None,
                     deadline, "the guest neither asked for a migration nor ended")
            if src.p.poll() is not None:
                rc = src.wait(1)
            else:
                rc = migrate(src, work, state, argv, log, deadline)
            for g in guests:
                g.t.join(10)  # the console's last lines, before the log closes
    except (OSError, subprocess.CalledProcessError) as e:
        die(f"{e}")
    finally:
        for g in guests:
            g.kill()
        shutil.rmtree(work, ignore_errors=True)
    lines = [ln for g in guests for ln in g.lines]
    trouble = [ln for ln in lines if TROUBLE.search(ln)]
    for ln in trouble[:20]:
        print(f"migrate_test: kernel log shows: {ln}", file=sys.stderr)
    reported = [int(m.group(1)) for ln in lines
                for m in [re.search(r"vmrun: command exited with status (\d+)", ln)] if m]
    if rc is None:
        die(f"timeout: no result within {a.timeout} s")
    if not reported:
        die(f"the guest died: qemu exited {rc} without a status (see {log_path})")
    if trouble:
        die(f"failing: kernel problems above (command status {reported[-1]})")
    if reported[-1]:
        print_said()
    return reported[-1]


if __name__ == "__main__":
    sys.exit(main())
