"""The typed verify report: one CheckResult per check, with its evidence."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["pass", "warn", "fail", "skip"]


class CheckResult(BaseModel):
    """One check: what it concluded, in one line, and the evidence behind it."""

    model_config = ConfigDict(frozen=True)

    name: str  # stable identifier, e.g. "reasoning_parser"
    title: str  # what a person reads in the table
    status: Status
    summary: str  # one line: the conclusion
    evidence: list[str] = Field(default_factory=list)  # observed facts, quoted text, numbers
    data: dict[str, Any] = Field(default_factory=dict)  # the measured values, for scripts


class VerifyReport(BaseModel):
    """Everything `servefit verify` found about one endpoint."""

    model_config = ConfigDict(frozen=True)

    url: str
    model: str | None
    engine: str | None  # "sglang" | "vllm" | None when it could not be told
    reference_url: str | None = None
    checks: list[CheckResult]
    warnings: list[str] = Field(default_factory=list)  # e.g. a key sent over plain HTTP

    @property
    def failed(self) -> list[CheckResult]:
        return [c for c in self.checks if c.status == "fail"]

    @property
    def ok(self) -> bool:
        """True when no check failed (warnings and skips do not fail a deployment)."""
        return not self.failed

    def check(self, name: str) -> CheckResult:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)
