"""studies/decoding_choice/choose_decoding.py: the rule that picks the evaluator's parse among its beams."""

from studies.decoding_choice import choose_decoding


def test_first_valid_skips_malformed_beams_and_beams_with_numbers_the_problem_lacks():
    problem = "Tom has num1 apples and eats num2 . How many are left ?"
    beams = ["x = num1 -", "x = num1 - num3", "x = num2 + num1", "x = num1 - num2"]
    assert choose_decoding.first_valid(beams, problem) == "x = num2 + num1"


def test_first_valid_falls_back_to_the_most_likely_beam_when_none_is_valid():
    assert choose_decoding.first_valid(["x = num4 * num5", "x = ( num1"], "Ann has num1 pens .") == "x = num4 * num5"


def test_first_valid_keeps_the_most_likely_beam_when_it_is_valid():
    assert choose_decoding.first_valid(["x = num1 * num2", "x = num1 + num2"], "num1 boxes of num2 pens") == \
        "x = num1 * num2"


def test_generate_returns_the_keywords_each_baseline_problem_was_written_from(monkeypatch):
    seen = []

    class FakeGenerate:
        @staticmethod
        def fn(params, model_dir, prompts):
            seen.extend(prompts)
            return [f"problem {i}" for i in range(len(prompts))]

    monkeypatch.setattr(choose_decoding.tasks_generate, "generate_lm", FakeGenerate)
    records = [{"id": "a", "equation": "x = num1 + num2", "text": "t"},
               {"id": "b", "equation": "x = num1 - num2", "text": "t"}]
    keywords = {"baseline": {"a": ["apples", "Tom"], "b": []}}
    paths = type("Paths", (), {"model_dir": None})()
    texts, contexts = choose_decoding.generate_with(None, "gpt_pre", paths, records, keywords)
    assert texts == ["problem 0", "problem 1"]
    assert contexts == [["apples", "Tom"], []]
    assert "apples Tom" in seen[0] and "x = num1 - num2" in seen[1]
