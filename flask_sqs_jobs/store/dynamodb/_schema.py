"""The DynamoDB store's one table: its key and TTL attributes, shared by every part."""

from __future__ import annotations

#: The table's key attributes: ``pk`` (what the item is about, e.g.
#: ``idem#<key>``) and ``sk`` (which part of it).
PARTITION_KEY = "pk"
SORT_KEY = "sk"
#: Items carrying this attribute (epoch seconds) are deleted by DynamoDB's TTL.
TTL_ATTRIBUTE = "expires_at_epoch"
