"""When a gracefully interrupted model's summary counts as an echo of the interrupt request."""

from __future__ import annotations

from steerable._core._interrupt_text import fallback_summary, is_echo

HINT = "stop here and sum up what you did so far"  # 10 words


def test_an_empty_reply_is_an_echo_and_a_missing_hint_echoes_nothing() -> None:
    assert is_echo("", HINT) and is_echo("...", HINT)
    assert not is_echo("I read three files.", "") and not is_echo("I read three files.", "!!")


def test_sixty_percent_of_the_reply_in_the_hints_words_is_the_threshold() -> None:
    # 10 words, 6 of them the hint's first six in order: exactly 60 %.
    assert is_echo("stop here and sum up what alpha beta gamma delta", HINT)
    # 11 words with the same 6 shared: under 60 %.
    assert not is_echo("stop here and sum up what alpha beta gamma delta epsilon", HINT)


def test_a_short_reply_needs_six_shared_words_unless_the_hint_is_shorter() -> None:
    assert is_echo("stop here and sum up what", HINT)  # 6 of 6, hint longer than 6
    assert not is_echo("stop here and sum up", HINT)  # 5 shared: too few
    assert is_echo("halt now please", "halt now please")  # the hint itself has 3 words
    long_reply = ("I opened the config and found that the port is set twice so I removed "
                  "the second one stop here now")
    assert not is_echo(long_reply, "stop here now")


def test_the_fallback_names_what_ran() -> None:
    assert fallback_summary([]) == "Interrupted before any tool ran."
    assert fallback_summary(["read"]) == "Interrupted after 1 tool call (read)."
    assert fallback_summary(["read", "bash"]) == "Interrupted after 2 tool calls (read, bash)."
