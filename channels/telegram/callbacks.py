"""What an inline button carries: the seam's button id (`gw:approve:<rid>`) and a MAC of it
bound to the chat, `gw:approve:<rid>.<mac>`, within Telegram's 64 bytes of callback_data.

A modified Telegram client can send any callback_data on any of the bot's messages, so the
data is signed (`Keys.tag`, a key of its own): a tampered id, or one copied into another
chat, reads as nothing and decides nothing.
"""

from __future__ import annotations

import hmac

from gateway.seam import CallbackId, Keys, decode

PURPOSE = "telegram-callback"
DATA_LIMIT = 64  # bytes of callback_data (core.telegram.org/bots/api#inlinekeyboardbutton)
MAC_CHARS = 16  # 96 bits of the MAC


class CallbackSigner:
    def __init__(self, keys: Keys) -> None:
        self.keys = keys

    def data(self, chat_id: int | str, button: str) -> str:
        """The callback_data of `button` in the chat `chat_id`."""
        data = f"{button}.{self._mac(chat_id, button)}"
        if len(data.encode()) > DATA_LIMIT:  # rids are 22 characters: this is a bug
            raise ValueError(f"callback_data over {DATA_LIMIT} bytes: {button!r}")
        return data

    def read(self, chat_id: int | str, data: str) -> CallbackId | None:
        """The click `data` stands for in the chat `chat_id`; None unless we signed it so."""
        button, _, mac = data.rpartition(".")
        if not button or not hmac.compare_digest(mac.encode(), self._mac(chat_id, button).encode()):
            return None
        return decode(button)

    def _mac(self, chat_id: int | str, button: str) -> str:
        return self.keys.tag(PURPOSE, f"{int(chat_id)}|{button}")[:MAC_CHARS]
