"""Static token file parsing/creation and the token + client-certificate authenticator."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from flotilla.apiserver.auth import (
    AUTHENTICATED_GROUP,
    MASTERS_GROUP,
    AuthenticationError,
    TokenAuthenticator,
    TokenFileError,
    UserInfo,
    ensure_token_file,
    format_token_line,
    parse_token_file,
)


def test_parse_kubernetes_format() -> None:
    text = (
        "# comment line\n"
        "\n"
        'tok1,alice,1001,"system:masters,devs"\n'
        "tok2,bob,1002\n"
        "tok3, carol , 1003 , ops\n"
        ",nobody,1004\n"
    )
    tokens = parse_token_file(text)
    assert tokens == {
        "tok1": UserInfo("alice", "1001", ("system:masters", "devs")),
        "tok2": UserInfo("bob", "1002", ()),
        "tok3": UserInfo("carol", "1003", ("ops",)),
    }


def test_parse_bom_and_duplicates() -> None:
    tokens = parse_token_file("\ufefft,a,1\nt,b,2\n")
    assert tokens == {"t": UserInfo("b", "2", ())}


def test_parse_rejects_short_records() -> None:
    with pytest.raises(TokenFileError, match="at least 3 columns"):
        parse_token_file("tok,user\n", "tokens.csv")


def test_parse_rejects_empty_user() -> None:
    with pytest.raises(TokenFileError, match="empty user name"):
        parse_token_file("tok,,1\n")


def test_format_round_trip() -> None:
    line = format_token_line("abc", "u", "9", ["g1", "g2"])
    assert line == 'abc,u,9,"g1,g2"\n'
    assert parse_token_file(line) == {"abc": UserInfo("u", "9", ("g1", "g2"))}
    assert format_token_line("abc", "u", "9") == "abc,u,9\n"
    with pytest.raises(ValueError):
        format_token_line("a,b", "u")


def test_ensure_token_file_creates_once(tmp_path: Path) -> None:
    path, token = ensure_token_file(tmp_path)
    assert path == tmp_path / "tokens.csv"
    assert token and len(token) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    tokens = parse_token_file(path.read_text())
    assert tokens[token].name == "admin"
    assert MASTERS_GROUP in tokens[token].groups
    assert tokens[token].uid

    path2, token2 = ensure_token_file(tmp_path)
    assert (path2, token2) == (path, token)
    assert list(tmp_path.iterdir()) == [path]  # no temp files left behind


def test_ensure_token_file_existing_file(tmp_path: Path) -> None:
    f = tmp_path / "tokens.csv"
    f.write_text('x1,ops,1,"system:masters"\n')
    assert ensure_token_file(tmp_path) == (f, "x1")
    f.write_text("y1,bob,1\nadm,admin,2\n")
    assert ensure_token_file(tmp_path) == (f, "adm")
    f.write_text("y1,bob,1\n")
    assert ensure_token_file(tmp_path) == (f, None)
    assert f.read_text() == "y1,bob,1\n"  # never rewritten


# ------------------------------------------------------------------------------------------- authenticator


@pytest.fixture
def authn(tmp_path: Path) -> TokenAuthenticator:
    f = tmp_path / "tokens.csv"
    f.write_text('good,alice,42,"devs,system:masters"\nplain,bob,43\n')
    return TokenAuthenticator.from_file(f)


def test_no_credentials(authn: TokenAuthenticator) -> None:
    assert authn.authenticate({}) is None
    assert authn.authenticate({"Authorization": ""}) is None
    assert authn.authenticate({"Authorization": "Basic Zm9vOmJhcg=="}) is None
    # like Kubernetes: the header is trimmed first, so "Bearer " carries no token at all
    assert authn.authenticate({"Authorization": "Bearer "}) is None


def test_valid_bearer_token(authn: TokenAuthenticator) -> None:
    user = authn.authenticate({"Authorization": "Bearer good"})
    assert user == UserInfo("alice", "42", ("devs", MASTERS_GROUP, AUTHENTICATED_GROUP))
    # scheme and header name are case-insensitive
    assert authn.authenticate({"authorization": "bearer plain"}) == UserInfo(
        "bob", "43", (AUTHENTICATED_GROUP,)
    )


@pytest.mark.parametrize("header", ["Bearer nope", "Bearer  good", "Bearer GOOD", "bearer x y"])
def test_invalid_bearer_token(authn: TokenAuthenticator, header: str) -> None:
    with pytest.raises(AuthenticationError):
        authn.authenticate({"Authorization": header})


def test_reload(authn: TokenAuthenticator) -> None:
    assert authn.path is not None
    authn.path.write_text("newtok,carol,7\n")
    authn.reload()
    assert authn.authenticate({"Authorization": "Bearer newtok"}) is not None
    with pytest.raises(AuthenticationError):
        authn.authenticate({"Authorization": "Bearer good"})


def _peercert(cn: str | None, *orgs: str) -> dict[str, object]:
    subject: list[tuple[tuple[str, str], ...]] = [(("countryName", "XX"),)]
    subject += [(("organizationName", o),) for o in orgs]
    if cn is not None:
        subject.append((("commonName", cn),))
    return {"subject": tuple(subject), "issuer": ((("commonName", "flotilla-ca"),),)}


def test_client_certificate_subject(authn: TokenAuthenticator) -> None:
    user = authn.authenticate({}, _peercert("dave", "system:masters", "team-a"))
    assert user == UserInfo("dave", "", ("system:masters", "team-a", AUTHENTICATED_GROUP))
    # a verified certificate wins over a (even invalid) bearer token, as in Kubernetes
    assert authn.authenticate({"Authorization": "Bearer nope"}, _peercert("dave")) == UserInfo(
        "dave", "", (AUTHENTICATED_GROUP,)
    )


def test_client_certificate_without_cn_falls_through(authn: TokenAuthenticator) -> None:
    assert authn.authenticate({}, _peercert(None, "g")) is None
    assert authn.authenticate({}, {}) is None
    assert authn.authenticate({"Authorization": "Bearer plain"}, _peercert(None)) == UserInfo(
        "bob", "43", (AUTHENTICATED_GROUP,)
    )


def test_client_certificates_can_be_disabled(tmp_path: Path) -> None:
    a = TokenAuthenticator({"t": UserInfo("u")}, client_certs=False)
    assert a.authenticate({}, _peercert("dave")) is None
    a.add_token("t2", UserInfo("v"))
    assert a.authenticate({"Authorization": "Bearer t2"}) == UserInfo("v", "", (AUTHENTICATED_GROUP,))
