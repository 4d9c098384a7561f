"""A typed client for the human-in-the-loop gateway (HumanLayer's HTTP API and its
extensions), with adapters for LangGraph, the OpenAI Agents SDK and Pydantic AI."""

from hitl_client._retry import RetryPolicy
from hitl_client.aio import AsyncClient
from hitl_client.errors import ApiError, GatewayError, Unavailable, WaitTimeout
from hitl_client.models import (
    FunctionCall,
    FunctionCallStatus,
    GatewayStatus,
    HumanContact,
    HumanContactStatus,
    PolicyProgress,
    ResponseOption,
    UserInfo,
)
from hitl_client.sync import Client

__version__ = "0.1.0"

__all__ = [
    "ApiError",
    "AsyncClient",
    "Client",
    "FunctionCall",
    "FunctionCallStatus",
    "GatewayError",
    "GatewayStatus",
    "HumanContact",
    "HumanContactStatus",
    "PolicyProgress",
    "ResponseOption",
    "RetryPolicy",
    "Unavailable",
    "UserInfo",
    "WaitTimeout",
    "__version__",
]
