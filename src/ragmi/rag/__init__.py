"""The target RAG system: retriever (dense FAISS or sparse BM25), template, generator.

Attack code never imports this package: it only sees queries and responses.
"""
