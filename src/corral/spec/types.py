"""Spec string types by meaning. A spec value reaches a root shell or a config file on every node, so
each string field says what it is and is checked for exactly that (whole-string matches: a trailing
newline never slips through a `$`):

- `Url` / `url_template(...)`: parsed; http(s) with a host, no credentials, no whitespace, quotes or
  shell characters. `http://` is refused later unless the spec sets `allow_http: true`
  (spec/rules_download.py finds every `UrlStr` in the spec).
- `AbsPath`: absolute, normalised (no `.`/`..`/`//`), a safe character set (no whitespace, quotes, `$`).
- `SlurmDuration`: a Slurm time value (`7-0`, `12:00:00`, `INFINITE`). `Duration`: seconds, written as
  an integer or `90s`, `30m`, `2h`, `1d` (an int after validation).
- `SlurmName`, `UnixUser` (an account corral logs in as), `UserName` (a cluster user, directory
  names too), `UnitName`, `Hostname` (RFC 1123), `HostPort`, `Email`, `Sha256`.
- `Fingerprint`: an OpenPGP key's 40 hex digits; spaces dropped and upper-cased first, so a
  fingerprint pasted as gpg prints it (`ABCD 1234 ...`, any case) is the same key (`fingerprint()`:
  the same for a CLI option).
- `MountOption`, `MountSource`, `SshPublicKey`, `Gecos`: storage and user fields (spec/models_storage.py,
  spec/models_users.py).
- `ConfigWord` / `ConfigValue`: a token (or a line) for a config file: no newline, quotes, `$`,
  backticks or backslashes. `ShellSafeValue`: for a config a tool evaluates in a shell (enroot.conf).
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

_URL_CHARS = re.compile(r"[A-Za-z0-9._~:/?@%+,=&-]+")
_PATH_CHARS = re.compile(r"/[A-Za-z0-9._+@:,=/-]*")  # no %: systemd expands %n in unit files
_HOST_LABEL = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
HOSTNAME_RE = re.compile(rf"{_HOST_LABEL}(\.{_HOST_LABEL})*")
SLURM_TIME_RE = re.compile(r"INFINITE|UNLIMITED|\d+|\d+:\d{2}(:\d{2})?|\d+-\d{1,2}(:\d{2}(:\d{2})?)?")
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
UNIX_USER_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
USER_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")  # directory users too: jo.doe, jo@corp
UNIT_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9:_.@\\-]{0,250}")
SHA256_RE = re.compile(r"[0-9a-f]{64}")
WORD_RE = re.compile(r"[A-Za-z0-9._/:=,+%@-]+")
_BAD_IN_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029'\"`$\\]")  # C0/C1 controls, line separators
SHELL_SAFE_RE = re.compile(r"[A-Za-z0-9 ._/:=,+%@-]*")  # for values a tool evaluates in a shell (enroot.conf)


def _bad(message: str) -> PydanticCustomError:
    """A validation error that reads as corral's words (no "Value error," prefix)."""
    return PydanticCustomError("corral_value", message.replace("{", "{{").replace("}", "}}"))


class UrlStr(str):
    """A checked URL (or URL template); spec/rules_download.py refuses `http://` ones without allow_http."""


def _url(v: str, names: tuple[str, ...] = ()) -> UrlStr:
    probe = v
    for n in names:  # a template's placeholders are checked like the text around them
        probe = probe.replace("{" + n + "}", "x")
    if "{" in probe or "}" in probe:
        allowed = ", ".join("{" + n + "}" for n in names) or "no placeholders"
        raise _bad(f"the URL may use only {allowed}")
    if not _URL_CHARS.fullmatch(probe):
        bad = sorted({c for c in probe if not _URL_CHARS.fullmatch(c)})
        raise _bad(f"the URL contains characters a URL here may not have: {''.join(bad)!r} "
                         "(whitespace, quotes and shell characters are refused; percent-encode them)")
    parts = urlsplit(probe)
    if parts.scheme not in ("https", "http"):
        raise _bad("the URL must start with https:// (or http:// with allow_http: true)")
    _host_port_of(parts, "the URL", "credentials in a URL would be written to nodes and logs: use a URL without user@")
    return UrlStr(v)


def _host_port_of(parts, what: str, credentials: str) -> None:
    """No user@, a valid host, a valid port (if any) in a split URL; `what` names it in the errors."""
    if "@" in parts.netloc:
        raise _bad(credentials)
    if not parts.hostname or not (HOSTNAME_RE.fullmatch(parts.hostname) or _is_ip(parts.hostname)):
        raise _bad(f"{what} has no valid host name")
    try:
        parts.port  # noqa: B018 - raises for a bad port
    except ValueError:
        raise _bad(f"{what}'s port is not a number from 1 to 65535") from None


def _proxy_url(v: str) -> str:
    """A proxy: http(s)://host[:port][/], nothing else (it lands in apt.conf, /etc/environment and systemd
    drop-ins, where a path, a query, a `%` or credentials have no place)."""
    parts = urlsplit(v)
    if not _URL_CHARS.fullmatch(v) or "%" in v or parts.scheme not in ("http", "https") \
            or parts.path not in ("", "/") or parts.query or parts.fragment:
        raise _bad("a proxy is http://HOST:PORT (or https://), with no path, query or % in it")
    _host_port_of(parts, "the proxy URL", "credentials in the proxy URL would be written to every node's "
                                          "/etc/environment: use a proxy that admits the cluster by address")
    return v.rstrip("/")


def _no_proxy(v: str) -> str:
    """A no_proxy entry: a host, a domain suffix (.example.com), an address or a network (CIDR)."""
    if HOSTNAME_RE.fullmatch(v.removeprefix(".")) or _is_ip(v):
        return v
    try:
        ipaddress.ip_network(v, strict=False)
        return v
    except ValueError:
        raise _bad("a no_proxy entry is a host, .domain, an address or a network such as 10.0.0.0/8") from None


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def url_template(*names: str) -> AfterValidator:
    """A download URL template that may use only the `{name}` placeholders given."""
    return AfterValidator(lambda v: _url(v, names))


def _abs_path(v: str) -> str:
    if not v.startswith("/"):
        raise _bad("must be an absolute path (starting with /)")
    if not _PATH_CHARS.fullmatch(v):
        raise _bad("a path here may use letters, digits and . _ + @ : , = - / only "
                         "(no whitespace, quotes, $ or other shell characters)")
    if posixpath.normpath(v) != v or v.startswith("//"):
        raise _bad(f"must be a normalised path (no ., .., // or trailing /): {posixpath.normpath(v)!r}")
    return v


def _pattern(regex: re.Pattern, what: str):
    def check(v: str) -> str:
        if not regex.fullmatch(v):
            raise _bad(f"not {what}")
        return v
    return AfterValidator(check)


def _host_port(v: str) -> str:
    host, sep, port = v.rpartition(":")
    if not sep or not HOSTNAME_RE.fullmatch(host) or not port.isdigit() or not 0 < int(port) < 65536:
        raise _bad("not host:port (a DNS name, then a port from 1 to 65535)")
    return v


def _email(v: str) -> str:
    local, at, domain = v.partition("@")
    if not at or not re.fullmatch(r"[A-Za-z0-9._%+-]{1,64}", local) or not HOSTNAME_RE.fullmatch(domain):
        raise _bad("not an e-mail address (name@domain, no spaces or quotes)")
    return v


def _config_value(v: str) -> str:
    if _BAD_IN_LINE.search(v):
        raise _bad("one line without quotes, $, backticks, backslashes or control characters")
    return v


def _shell_safe(v: str) -> str:
    if not SHELL_SAFE_RE.fullmatch(v):
        raise _bad("letters, digits, spaces and . _ / : = , + % @ - only (the tool reads it through a shell)")
    return v


Url = Annotated[str, AfterValidator(_url)]
ProxyUrl = Annotated[str, AfterValidator(_proxy_url)]
NoProxy = Annotated[str, AfterValidator(_no_proxy)]
AbsPath = Annotated[str, AfterValidator(_abs_path)]
SlurmDuration = Annotated[str, _pattern(SLURM_TIME_RE, "a Slurm time (minutes, MM:SS, HH:MM:SS, "
                                                      "D-HH[:MM[:SS]], INFINITE or UNLIMITED)")]
SlurmName = Annotated[str, _pattern(NAME_RE, "a name of lowercase letters, digits, _ and - "
                                             "(starting with a letter or digit, at most 63)")]
UnixUser = Annotated[str, _pattern(UNIX_USER_RE, "a Unix user name (lowercase letters, digits, _ and -, "
                                                 "starting with a letter or _)")]
UserName = Annotated[str, _pattern(USER_NAME_RE, "a user name (letters, digits and _ . @ -, "
                                                 "not starting with . @ or -; at most 64)")]
UnitName = Annotated[str, _pattern(UNIT_RE, "a systemd unit name (letters, digits, : _ . @ -; "
                                            "not starting with -)")]
Hostname = Annotated[str, _pattern(HOSTNAME_RE, "a host name (RFC 1123: letters, digits, - and dots)")]
HostPort = Annotated[str, AfterValidator(_host_port)]
Email = Annotated[str, AfterValidator(_email)]
PackageName = Annotated[str, _pattern(re.compile(r"[a-z0-9][a-z0-9.+-]{0,127}"),
                                      "a Debian package name (lowercase letters, digits, . + -)")]
Sha256 = Annotated[str, _pattern(SHA256_RE, "a sha256 (64 lowercase hex digits)")]
ConfigWord = Annotated[str, _pattern(WORD_RE, "one word of letters, digits and . _ / : = , + % @ -")]
ConfigValue = Annotated[str, AfterValidator(_config_value)]
ShellSafeValue = Annotated[str, AfterValidator(_shell_safe)]

MountOption = Annotated[str, _pattern(re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=:/@+-]{0,127}"),
                                      "one mount or export option (letters, digits and _ . = : / @ + -; "
                                      "no commas: give each option as its own list item)")]
ExportOption = Annotated[str, _pattern(re.compile(r"[a-z_]{1,32}(=[A-Za-z0-9_.:@/+-]{1,128})?"),
                                       "one export option of exports(5): a word, or word=value (e.g. sync, "
                                       "root_squash, sec=krb5p, fsid=1)")]
MountSource = Annotated[str, _pattern(re.compile(r"[A-Za-z0-9_\[][A-Za-z0-9_.@:,/=+\[\]-]{0,255}"),
                                      "a filesystem source (e.g. 10.0.0.5@tcp:/lustre, mon1:6789:/; letters, "
                                      "digits and _ . @ : , / = + - [ ] only)")]
SSH_KEY_RE = re.compile(r"(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|"
                        r"sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]{32,8192}={0,3}( [A-Za-z0-9_.@+:=-]{1,128})?")
SshPublicKey = Annotated[str, _pattern(SSH_KEY_RE, "an OpenSSH public key line (TYPE BASE64 [COMMENT]; no options, "
                                                   "the comment without spaces)")]
Gecos = Annotated[str, _pattern(re.compile(r"([A-Za-z0-9._@+][A-Za-z0-9 ._@+-]{0,127})?"),
                                "a full name (letters, digits, spaces and . _ @ + - only; not starting "
                                "with - or a space)")]


_DURATION = re.compile(r"(\d{1,7})([smhd]?)")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(v: object) -> int:
    """Seconds from an int or "90s", "30m", "2h", "1d"."""
    if isinstance(v, bool):
        raise PydanticCustomError("corral", "not a duration (seconds, or a number with s, m, h or d: 30m, 2h)")
    if isinstance(v, int):
        return v
    m = _DURATION.fullmatch(v) if isinstance(v, str) else None
    if not m:
        raise PydanticCustomError("corral", "not a duration (seconds, or a number with s, m, h or d: 30m, 2h)")
    return int(m.group(1)) * _UNIT[m.group(2)]


def fingerprint(v: object) -> object:
    """An OpenPGP fingerprint as corral compares it: spaces dropped, upper case (gpg prints it in groups
    of four with spaces; either case is the same key). Only spaces: a newline or a control character is
    still refused. Not a string: left to the type check."""
    return v.replace(" ", "").upper() if isinstance(v, str) else v


Fingerprint = Annotated[str, BeforeValidator(fingerprint)]  # the fields keep their 40-hex-digit pattern


Duration = Annotated[int, BeforeValidator(_duration),
                     WithJsonSchema({"anyOf": [{"type": "integer"}, {"type": "string", "pattern": _DURATION.pattern}]})]
