"""Setting Teams up: `gateway check` gets a token (client secret or certificate) and the
signing keys, the app package to upload, and every setting documented and kept secret."""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import pytest
from pydantic import SecretStr

from channels.teams.channel import TeamsChannel
from channels.teams.settings import TeamsSettings
from gateway.cli.main import main
from gateway.errors import DeliveryError
from tests.channels.teams.helpers import teams_channel
from tests.fakes.teams import APP_ID, FakeTeams, self_signed_certificate
from tests.helpers import detached

REPO_ROOT = Path(__file__).resolve().parents[3]


def channel(fake: FakeTeams, **settings: object) -> TeamsChannel:
    return teams_channel(fake, **settings)(detached("teams"))


async def test_check_gets_a_token_and_the_signing_keys(fake: FakeTeams) -> None:
    teams = channel(fake)
    try:
        line = await teams.check()
    finally:
        await teams.aclose()
    assert f"token for app {APP_ID} from 127.0.0.1" in line and "1 signing keys" in line
    assert fake.grants[-1]["client_secret"] == "fake-client-secret"


async def test_check_with_a_wrong_secret_fails_for_good_and_says_why(fake: FakeTeams) -> None:
    teams = channel(fake, app_password=SecretStr("wrong"))
    try:
        with pytest.raises(DeliveryError, match="refused the app's credentials: invalid_client"):
            await teams.check()
    finally:
        await teams.aclose()
    assert fake.grants  # it asked


async def test_a_certificate_signs_the_client_assertion(fake: FakeTeams, tmp_path: Path) -> None:
    pem, certificate = self_signed_certificate()
    (tmp_path / "bot.pem").write_bytes(pem)
    fake.trust_certificate(certificate)
    teams = channel(fake, app_password=None, certificate_file=str(tmp_path / "bot.pem"))
    try:
        assert "token for app" in await teams.check()
    finally:
        await teams.aclose()
    assert "client_secret" not in fake.grants[-1]
    assert fake.grants[-1]["client_assertion_type"].endswith("jwt-bearer")

    other, _untrusted = self_signed_certificate()
    (tmp_path / "other.pem").write_bytes(other)
    teams = channel(fake, app_password=None, certificate_file=str(tmp_path / "other.pem"))
    try:
        with pytest.raises(DeliveryError, match="invalid_client"):
            await teams.check()
    finally:
        await teams.aclose()


def test_without_settings_the_channel_is_off_and_names_what_is_missing() -> None:
    teams = TeamsChannel(detached("teams"), TeamsSettings(_env_file=None))
    assert teams.missing_settings() == [
        "TEAMS_APP_ID",
        "TEAMS_TENANT_ID",
        "TEAMS_APP_PASSWORD (or TEAMS_CERTIFICATE_FILE)",
    ]
    assert teams.connection is None


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_gateway_teams_manifest_writes_the_app_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAMS_APP_ID", APP_ID)
    monkeypatch.chdir(tmp_path)
    package = tmp_path / "teams.zip"
    url = "https://gw.example.com/"
    with pytest.raises(SystemExit) as done:
        main(["teams", "manifest", "--public-url", url, "--output", str(package)])
    assert done.value.code == 0
    with zipfile.ZipFile(package) as opened:
        assert sorted(opened.namelist()) == ["color.png", "manifest.json", "outline.png"]
        manifest = json.loads(opened.read("manifest.json"))
        color, outline = opened.read("color.png"), opened.read("outline.png")
    assert manifest["id"] == APP_ID and manifest["bots"][0]["botId"] == APP_ID
    assert set(manifest["bots"][0]["scopes"]) == {"personal", "team", "groupChat"}
    assert manifest["validDomains"] == ["gw.example.com"]
    assert manifest["icons"] == {"color": "color.png", "outline": "outline.png"}
    assert len(manifest["name"]["short"]) <= 30 and len(manifest["description"]["short"]) <= 80
    assert (_png_size(color), _png_size(outline)) == ((192, 192), (32, 32))


def test_the_manifest_needs_the_app_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TEAMS_APP_ID", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        main(["teams", "manifest", "--public-url", "https://gw.example.com"])
    assert done.value.code == 2
    assert "set TEAMS_APP_ID" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.zip"))


def test_secrets_stay_out_of_repr() -> None:
    settings = TeamsSettings(_env_file=None, app_password="s3cret-value")
    assert "s3cret-value" not in repr(settings) and "s3cret-value" not in str(settings)
