# minicoder workspace sync: keeps /workspace, a volume on an engine that does
# not see the host's files, in step with the host's copy of the workspace.
# Run through the supervisor, as the sandbox user, between commands (never
# while one runs: the supervisor has ended every process by then).
#
#   sync.py apply    the host uploaded /sync/in/files.tar (what changed on its
#                    side) and /sync/in/removed.json (what it removed): remove,
#                    extract, then record what /workspace holds
#   sync.py collect MAX_BYTES MAX_FILES MAX_FILE_BYTES
#                    compare /workspace with the record; write what changed to
#                    /sync/out/changes.tar, what went to /sync/out/removed.json,
#                    and record again; past either limit, write nothing and say
#                    so (the host then starts a fresh container from its copy);
#                    a file past MAX_FILE_BYTES stays here, unread, as the host
#                    leaves such a file of its own unread
# Paths in the JSON files are the hex of their bytes: names need not be UTF-8.
#
# The host trusts nothing this writes: it extracts the changes into its copy
# confined to the workspace, bounded, links as links. This side only has to be
# right for an honest run; a command that tampers with /sync can only keep its
# own changes from reaching the host.
import json, os, shutil, stat, sys, tarfile

# The extraction filter where this Python has one (3.12, and back-ported
# releases); the tar comes from the host, which names only plain paths.
SAFE = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}

WS = "/workspace"
SYNC = "/sync"
STATE = SYNC + "/state.json"


def listing():
    """Every entry under /workspace, and the folders that could not be read
    (what was under them is not known, which is not the same as gone)."""
    found = {}
    unread = []
    total = 0
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(WS, rel) if rel else WS))
        except OSError:
            unread.append(rel)
            continue
        for e in entries:
            path = rel + "/" + e.name if rel else e.name
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            kind = stat.S_IFMT(st.st_mode)
            if stat.S_ISDIR(st.st_mode):
                # A directory changes with its entries: its mode is its own.
                found[path] = [kind, stat.S_IMODE(st.st_mode)]
                stack.append(path)
            else:
                found[path] = [kind, stat.S_IMODE(st.st_mode), st.st_size,
                               st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
                # Allocated, as the limit counts (a sparse file is what it holds).
                total += st.st_blocks * 512
    return found, total, unread


def record(found):
    tmp = STATE + ".tmp"
    with open(tmp, "w") as f:
        json.dump(found, f)
    os.replace(tmp, STATE)


def remove(path):
    full = os.path.join(WS, path)
    try:
        st = os.lstat(full)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(full, ignore_errors=True)
    else:
        os.unlink(full)


def safe(name):
    parts = name.split("/")
    return name and not name.startswith("/") and ".." not in parts and "" not in parts


def apply():
    inbox = SYNC + "/in"
    removed = os.path.join(inbox, "removed.json")
    if os.path.exists(removed):
        with open(removed) as f:
            for name in json.load(f):
                path = os.fsdecode(bytes.fromhex(name))
                if safe(path):
                    remove(path)
    files = os.path.join(inbox, "files.tar")
    if os.path.exists(files):
        with tarfile.open(files) as tar:
            for member in tar:
                if not safe(member.name):
                    continue
                full = os.path.join(WS, member.name)
                try:
                    st = os.lstat(full)
                    if not (member.isdir() and stat.S_ISDIR(st.st_mode)):
                        remove(member.name)
                except OSError:
                    pass
                tar.extract(member, WS, set_attrs=not member.issym(), **SAFE)
    shutil.rmtree(inbox, ignore_errors=True)
    found, total, _ = listing()
    record(found)
    print(json.dumps({"files": len(found), "bytes": total}))


def collect(max_bytes, max_files, max_file_bytes):
    try:
        with open(STATE) as f:
            before = json.load(f)
    except (OSError, ValueError):
        before = {}
    found, total, unread = listing()
    # What was under a folder that could not be read is kept as it was.
    for path, facts in before.items():
        if path not in found and any(path.startswith(u + "/") for u in unread if u):
            found[path] = facts
    st = os.statvfs(WS)
    report = {"files": len(found), "bytes": total, "free": st.f_bavail * st.f_frsize}
    if total > max_bytes or len(found) > max_files:
        report["over"] = True
        print(json.dumps(report))
        return
    out = SYNC + "/out"
    shutil.rmtree(out, ignore_errors=True)
    os.mkdir(out)
    removed = [p for p in before if p not in found]
    gone = set(removed)
    # A removed directory takes what was under it: name it alone.
    removed = [p for p in removed if p.rpartition("/")[0] not in gone]
    changed = sorted(p for p, facts in found.items() if before.get(p) != facts)
    unread = [p for p in changed
              if stat.S_ISREG(found[p][0]) and found[p][2] > max_file_bytes]
    skip = set(unread)
    changed = [p for p in changed if p not in skip]
    with tarfile.open(out + "/changes.tar", "w", format=tarfile.PAX_FORMAT) as tar:
        for path in changed:
            full = os.path.join(WS, path)
            try:
                info = tar.gettarinfo(full, arcname=path)
                if info.islnk():
                    # A second name of a file goes as a file of its own.
                    info.type, info.linkname = tarfile.REGTYPE, ""
                    info.size = os.lstat(full).st_size
                if info.isreg():
                    with open(full, "rb") as f:
                        tar.addfile(info, f)
                elif info.isdir() or info.issym():
                    tar.addfile(info)
            except OSError:
                # Unreadable: recorded as it was, so it is asked again later.
                if path in before:
                    found[path] = before[path]
                else:
                    found.pop(path, None)
    with open(out + "/removed.json", "w") as f:
        json.dump([os.fsencode(p).hex() for p in removed], f)
    record(found)
    report.update(changed=len(changed), removed=len(removed), unread=len(unread))
    print(json.dumps(report))


if __name__ == "__main__":
    if sys.argv[1] == "apply":
        apply()
    else:
        collect(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
