"""Recall: finding the notes that answer a question, over both stores.

May import the floors below it: ``mdmem.store``, ``mdmem.extract`` and the kernel.
"""
