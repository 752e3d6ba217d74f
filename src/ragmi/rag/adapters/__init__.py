"""Adapters from RAG frameworks to the contract of a python target (``ragmi.rag.python_target``):
``langchain.from_chain`` for a LangChain runnable, ``llamaindex.from_query_engine`` for a LlamaIndex
query engine.  Neither imports its framework: they read the objects the user's chain returns, so
ragmi needs neither package unless a target uses it.
"""
