import hashlib
import json
import subprocess
import sys

from ptb_harness.stages.provenance import image_digest, parse_versions, versions_command


def test_image_digest_is_the_sha256_and_is_cached(tmp_path):
    image = tmp_path / "scorer.sif"
    image.write_bytes(b"x" * 10_000)
    cache = tmp_path / "digests.json"
    d = image_digest(str(image), cache)
    assert d["sha256"] == hashlib.sha256(b"x" * 10_000).hexdigest() and d["bytes"] == 10_000
    # cached by (path, size, mtime): a changed image is hashed again
    assert len(json.loads(cache.read_text())) == 1
    image.write_bytes(b"y" * 10_001)
    assert image_digest(str(image), cache)["sha256"] == hashlib.sha256(b"y" * 10_001).hexdigest()
    assert image_digest(str(tmp_path / "missing.sif"), cache)["error"]
    assert image_digest(None, cache) is None


def test_versions_command_reports_what_is_installed():
    cmd = versions_command(sys.executable)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    found = parse_versions(out)
    assert found["python"] == ".".join(map(str, sys.version_info[:3]))
    assert "pandas" not in found  # only the scorer packages asked for
