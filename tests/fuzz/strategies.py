"""Random and hostile input for the fuzz tier."""

from __future__ import annotations

import json
import typing as t

from hypothesis import strategies as st

from tests.engine.test_wire_properties import any_text
from tests.engine.test_wire_properties import json_values

#: Strings an attacker with sqs:SendMessage, or a careless operator, might send.
HOSTILE_STRINGS = [
    "",
    " ",
    "\x00",
    "\ud800",
    "\u202e\u2066",
    "\x1b[2J\x1b]0;pwned\x07",
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "${jndi:ldap://x}",
    "%s%s%n",
    "1e999999",
    "-0",
    "NaN",
    "Infinity",
    "9" * 5000,
    "[" * 5000,
    "{" * 5000,
    '{"a":' * 3000 + "1" + "}" * 3000,
    '{"a": 1, "a": 2}',
    '{"\\ud800": "\\udfff"}',
    "__import__('os').system('id')",
    "cos\nsystem\n(S'id'\ntR.",  # a pickle
    "x" * 300_000,
]

hostile_text = st.sampled_from(HOSTILE_STRINGS) | any_text
#: JSON text, sometimes broken on purpose.
json_text = (
    json_values.map(lambda v: json.dumps(v, allow_nan=True))
    | hostile_text
    | json_values.map(lambda v: json.dumps(v)[:-1])
)
hostile_values: st.SearchStrategy[t.Any] = (
    json_values
    | hostile_text
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats()
    | st.builds(object)
    | st.binary(max_size=20)
    | st.lists(st.none(), max_size=3).map(tuple)
    | st.sets(st.integers(), max_size=3)
)
