"""The base of every settings class (the gateway's and each channel's): read from the
environment and `.env`, unknown names ignored, and an empty value is an unset one."""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin

from pydantic import model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class EnvSettings(BaseSettings):
    """Subclasses add their fields and an `env_prefix`; every one is in `.env.example`."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _empty_is_unset(cls, values: Any) -> Any:
        """`SLACK_BOT_TOKEN=` in a `.env` means "not set", for every optional setting."""
        if not isinstance(values, dict):
            return values
        return {
            name: None if value == "" and _optional(cls, name) else value
            for name, value in values.items()
        }


def _optional(cls: type[BaseSettings], name: str) -> bool:
    field = cls.model_fields.get(name)
    if field is None:
        return False
    annotation = field.annotation
    union = get_origin(annotation) in (Union, types.UnionType)
    return union and type(None) in get_args(annotation)
