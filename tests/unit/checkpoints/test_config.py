"""storage_config: Flink's keys to a StorageConfig; bad values name the key; credentials never shown."""

from __future__ import annotations

import pytest

from flotilla.checkpoints import StorageConfigError, storage_config


def test_new_checkpoint_key_wins_over_the_old_one() -> None:
    cfg = storage_config({"execution.checkpointing.dir": "s3://b/new", "state.checkpoints.dir": "s3://b/old",
                          "state.savepoints.dir": "s3://b/sp"})
    assert cfg.checkpoint_dir == "s3://b/new"
    assert cfg.savepoint_dir == "s3://b/sp"


def test_old_keys_and_nested_yaml_are_read() -> None:
    cfg = storage_config({"state": {"checkpoints": {"dir": "file:///data/ck/"}, "savepoints.dir": "/data/sp"}})
    assert cfg.checkpoint_dir == "file:///data/ck"
    assert cfg.savepoint_dir == "/data/sp"
    assert cfg.storage_options == {}  # no S3 options for local directories


def test_savepoint_dir_new_key_preferred() -> None:
    cfg = storage_config({"execution.checkpointing.savepoint-dir": "s3://b/a", "state.savepoints.dir": "s3://b/b"})
    assert cfg.savepoint_dir == "s3://b/a"


def test_default_checkpoint_dir_applies_only_without_a_key() -> None:
    assert storage_config({}, default_checkpoint_dir="/shared/ck").checkpoint_dir == "/shared/ck"
    assert storage_config({"state.checkpoints.dir": "/mine"}, default_checkpoint_dir="/shared").checkpoint_dir == "/mine"
    assert storage_config(None).checkpoint_dir is None


def test_s3_keys_become_s3fs_options() -> None:
    cfg = storage_config({"state.checkpoints.dir": "s3a://bucket/ck", "s3.endpoint": "http://127.0.0.1:9000",
                          "s3.path.style.access": "true", "s3.access-key": "AK", "s3.secret-key": "SK"})
    opts = dict(cfg.storage_options)
    assert opts["endpoint_url"] == "http://127.0.0.1:9000"
    assert opts["key"] == "AK" and opts["secret"] == "SK"
    assert opts["config_kwargs"]["s3"] == {"addressing_style": "path"}
    assert cfg.checkpoint_dir == "s3a://bucket/ck"  # the job's own scheme is kept in paths


def test_bare_endpoint_host_gets_https() -> None:
    cfg = storage_config({"state.checkpoints.dir": "s3://b/ck", "s3.endpoint": "minio.local:9000"})
    assert cfg.storage_options["endpoint_url"] == "https://minio.local:9000"


def test_secret_data_wins_over_the_configuration() -> None:
    cfg = storage_config({"state.checkpoints.dir": "s3://b/ck", "s3.access-key": "AK", "s3.secret-key": "SK"},
                         {"s3.access-key": "AK2", "s3.secret-key": "SK2"})
    assert (cfg.storage_options["key"], cfg.storage_options["secret"]) == ("AK2", "SK2")


def test_describe_and_repr_never_show_credentials() -> None:
    cfg = storage_config({"state.checkpoints.dir": "s3://b/ck", "s3.endpoint": "http://e:1",
                          "s3.access-key": "AKIAVERYSECRET", "s3.secret-key": "topsecretvalue"})
    for text in (cfg.describe(), repr(cfg), str(cfg)):
        assert "AKIAVERYSECRET" not in text and "topsecretvalue" not in text
    assert "s3://b/ck" in cfg.describe() and "http://e:1" in cfg.describe()


@pytest.mark.parametrize(("conf", "key"), [
    ({"execution.checkpointing.dir": "relative/dir"}, "execution.checkpointing.dir"),
    ({"state.checkpoints.dir": 42}, "state.checkpoints.dir"),
    ({"state.savepoints.dir": "nosuchproto://x/y"}, "state.savepoints.dir"),
    ({"state.checkpoints.dir": "s3:///no-bucket"}, "state.checkpoints.dir"),
    ({"state.checkpoints.dir": "s3://b/ck", "s3.path.style.access": "maybe"}, "s3.path.style.access"),
    ({"state.checkpoints.dir": "s3://b/ck", "s3.endpoint": "ftp://x"}, "s3.endpoint"),
    ({"state.checkpoints.dir": "s3://b/ck", "s3.access-key": "AK"}, "s3.secret-key"),
])
def test_bad_values_name_the_key(conf: dict[str, object], key: str) -> None:
    with pytest.raises(StorageConfigError) as e:
        storage_config(conf)
    assert e.value.key == key
    assert str(e.value).startswith(key)
    assert "AK" not in str(e.value).replace(key, "")


def test_bad_credential_type_does_not_echo_the_value() -> None:
    with pytest.raises(StorageConfigError) as e:
        storage_config({"state.checkpoints.dir": "s3://b/ck", "s3.access-key": ["AKSECRET"], "s3.secret-key": "x"})
    assert "AKSECRET" not in str(e.value)
