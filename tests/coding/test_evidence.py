"""Facts an answer states that the evidence does not contain (``coding._evidence``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from steerable.coding._evidence import (
    evidence_counts,
    path_names,
    tool_vocabulary,
    unsupported_facts,
)

names = st.from_regex(r"[a-z]{2,8}_[a-z]{2,8}|[a-z]{2,8}\.(py|txt|json)", fullmatch=True)
numbers = st.integers(min_value=2, max_value=99999).map(str)
prose = st.sampled_from(["It is", "Es ist", "C'est", "Son", "Der Wert ist", "=>", "value:"])


@given(facts=st.lists(st.one_of(names, numbers), min_size=1, max_size=5), lead=prose,
       noise=st.text(alphabet="abc \n", max_size=30))
def test_facts_taken_from_the_evidence_are_never_flagged(facts, lead, noise):
    evidence = noise + "\n" + "\n".join(f"line {f} here" for f in facts)
    answer = f"{lead} " + ", ".join(facts) + "."
    assert unsupported_facts(answer, evidence, evidence_counts([evidence])) == []


@given(known=st.lists(numbers, max_size=4), invented=st.integers(100000, 999999), lead=prose)
def test_a_number_no_result_shows_is_flagged_in_any_language(known, invented, lead):
    evidence = "\n".join(known)
    answer = f"{lead} {invented}."
    assert unsupported_facts(answer, evidence, set()) == [str(invented)]


def test_counts_of_result_lines_and_list_markers_are_not_claims():
    result = "a.txt\nb.txt\nc.txt\n"
    assert unsupported_facts("There are 3 files:\n1. a.txt\n2. b.txt", result,
                             evidence_counts([result])) == []


def test_names_quotes_and_paths():
    evidence = "src/app/stock.py:1:class Inventory\nMAX_RETRIES = 5"
    assert unsupported_facts("`Inventory` is in src/app/stock.py; MAX_RETRIES is 5.", evidence,
                             set()) == []
    assert unsupported_facts("See `get_user` in users.py.", evidence, set()) == [
        "get_user", "users.py"]


def test_numbers_may_go_unchecked_for_an_answer_that_needed_no_workspace():
    assert unsupported_facts("17 + 25 = 42", "What is 17 + 25?", set(), numbers=False) == []
    assert unsupported_facts("17 + 25 = 42", "What is 17 + 25?", set()) == ["42"]


tool_names = st.from_regex(r"[a-z]{3,8}", fullmatch=True)
param_names = st.from_regex(r"[a-z]{3,8}(_[a-z]{3,8})?", fullmatch=True)


@given(tools=st.lists(st.tuples(tool_names, st.lists(param_names, min_size=1, max_size=3)),
                      min_size=1, max_size=4),
       lead=prose, pick=st.randoms(use_true_random=False))
def test_the_offered_tools_and_their_parameters_are_no_facts(tools, lead, pick):
    # An answer that describes the steps ("I would call `read` with `path`") names the agent's
    # own tools: that is no fact about the workspace, in any language.
    specs = [(name, {"type": "object", "properties": {p: {"type": "string"} for p in params}})
             for name, params in tools]
    words = tool_vocabulary(specs)
    name, params = pick.choice(tools)
    param = pick.choice(params)
    answer = f"{lead} `{name}` ({param}), `{name}(notes.txt)` `{name} -r x`, {param}."
    evidence = "notes.txt says x"
    assert unsupported_facts(answer, evidence, set(), vocabulary=words) == []
    # Without the vocabulary the same names are flagged (what the recheck was sent for).
    assert unsupported_facts(answer, evidence, set()) != []


def test_a_use_of_a_tool_still_has_its_own_facts_checked():
    words = tool_vocabulary([("grep", {"properties": {"pattern": {}}})])
    found = unsupported_facts("Run `grep PORT server.py`: the port is 8080.",
                              "PORT = 5000 in app.py", set(), vocabulary=words)
    assert found == ["server.py", "8080"]
    # A name that is no offered tool's is still a name.
    assert unsupported_facts("Call `fetch_user`.", "", set(), vocabulary=words) == ["fetch_user"]


def test_a_name_called_in_code_is_no_file_name():
    # "print greet.hello('Ada')" named no file greet.hello (the 1.5B created one).
    assert path_names("add hello to greet.py and print greet.hello('Ada') in main.py") == [
        "greet.py", "main.py"]
