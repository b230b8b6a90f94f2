"""A real S3-compatible server for tests: moto's server mode in a child process on 127.0.0.1.

Use the fixture (import it into the test module, or into a conftest)::

    from tests.support.s3 import S3Server, s3_server  # noqa: F401

    def test_something(s3_server: S3Server) -> None:
        conf = s3_server.flink_configuration("flink/checkpoints")   # a FlinkDeployment's flinkConfiguration
        config = s3_server.storage_config("flink/checkpoints")      # the same, as a StorageConfig
        s3_server.endpoint, s3_server.access_key, s3_server.secret_key, s3_server.bucket
        s3_server.client()                                          # a boto3 S3 client for direct checks

``s3_server`` is one server per test module with IAM authentication enforced: requests need the access key the
fixture created (any other key gets InvalidAccessKeyId; a wrong secret gets SignatureDoesNotMatch). Each test
gets its own fresh bucket (``s3_server.bucket``). Or start one by hand: ``S3Server.start(log_dir)`` then
``stop()`` (``stop()`` is also how a test makes the storage unreachable).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from flotilla.checkpoints import StorageConfig, storage_config
from tests.support.pipeline import free_port
from tests.support.processes import LoggedProcess

REGION = "us-east-1"
# requests the server serves before it enforces authentication: the set-up below makes exactly these
_SETUP_REQUESTS = 3
_POLICY = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}


@dataclass
class S3Server:
    process: LoggedProcess
    port: int
    access_key: str = ""
    secret_key: str = ""
    bucket: str = ""
    buckets: list[str] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def start(cls, log_dir: Path, *, auth: bool = True, timeout: float = 30.0) -> S3Server:
        """Start the server; with ``auth``, create an IAM user allowed s3:* and enforce authentication."""
        port = free_port()
        env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT=str(_SETUP_REQUESTS if auth else -1),
                   AWS_DEFAULT_REGION=REGION, MOTO_PORT=str(port))
        log = log_dir / f"moto-{port}.log"
        with open(log, "wb") as out:
            popen = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                     stdout=out, stderr=subprocess.STDOUT, env=env)
        server = cls(LoggedProcess(popen, log), port)
        deadline = time.monotonic() + timeout
        while True:
            if not server.process.alive():
                raise RuntimeError(f"moto server exited:\n{server.process.output()}")
            try:
                urllib.request.urlopen(f"{server.endpoint}/moto-api/data.json", timeout=1).read()
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    server.stop()
                    raise RuntimeError(f"moto server did not answer:\n{server.process.output()}") from None
                time.sleep(0.1)
        if auth:
            import boto3

            iam = boto3.client("iam", endpoint_url=server.endpoint, region_name=REGION,
                               aws_access_key_id="setup", aws_secret_access_key="setup")
            iam.create_user(UserName="flink")
            iam.put_user_policy(UserName="flink", PolicyName="s3", PolicyDocument=json.dumps(_POLICY))
            key = iam.create_access_key(UserName="flink")["AccessKey"]
            server.access_key, server.secret_key = key["AccessKeyId"], key["SecretAccessKey"]
        else:
            server.access_key, server.secret_key = "testing", "testing"
        return server

    def stop(self) -> None:
        self.process.kill()

    def client(self, *, access_key: str | None = None, secret_key: str | None = None) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=access_key or self.access_key,
                            aws_secret_access_key=secret_key or self.secret_key)

    def new_bucket(self) -> str:
        name = f"flink-{secrets.token_hex(4)}"
        self.client().create_bucket(Bucket=name)
        self.buckets.append(name)
        self.bucket = name
        return name

    def flink_configuration(self, prefix: str = "flink/checkpoints", *, bucket: str | None = None,
                            savepoints: str | None = "flink/savepoints", scheme: str = "s3",
                            access_key: str | None = None, secret_key: str | None = None) -> dict[str, str]:
        """A flinkConfiguration that names this server's bucket, with Flink's s3 keys."""
        b = bucket or self.bucket
        conf = {
            "execution.checkpointing.dir": f"{scheme}://{b}/{prefix}",
            "s3.endpoint": self.endpoint,
            "s3.path.style.access": "true",
            "s3.access-key": access_key or self.access_key,
            "s3.secret-key": secret_key or self.secret_key,
        }
        if savepoints:
            conf["execution.checkpointing.savepoint-dir"] = f"{scheme}://{b}/{savepoints}"
        return conf

    def storage_config(self, prefix: str = "flink/checkpoints", **kwargs: Any) -> StorageConfig:
        return storage_config(self.flink_configuration(prefix, **kwargs))


@pytest.fixture(scope="module")
def s3_server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = S3Server.start(tmp_path_factory.mktemp("moto"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_server(s3_server_process: S3Server) -> S3Server:
    """The module's S3 server with a fresh bucket for this test (``.bucket``)."""
    if not s3_server_process.process.alive():
        pytest.fail(f"the S3 server died:\n{s3_server_process.process.output()}")
    s3_server_process.new_bucket()
    return s3_server_process
