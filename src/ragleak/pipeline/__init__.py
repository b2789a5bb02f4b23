"""The pipeline layer, above the defenses: the audited ``RAGPipeline`` that runs a defense's four
hooks around retrieval and generation, the targets an attack queries (the pipeline, an HTTP
endpoint, a Python callable), the multi-turn ``Conversation`` over any of them, and
``build_target``, the one place a target is built.

``from ragleak.pipeline import RAGPipeline`` is the public entry.
"""

from ragleak.pipeline.build import Source, build_target
from ragleak.pipeline.conversation import Conversation
from ragleak.pipeline.rag import AuditPolicy, RAGPipeline, Response
from ragleak.pipeline.target import CallableTarget, HttpTarget, PipelineTarget, StopRule, Target

__all__ = ["AuditPolicy", "CallableTarget", "Conversation", "HttpTarget", "PipelineTarget", "RAGPipeline", "Response",
           "Source", "StopRule", "Target", "build_target"]
