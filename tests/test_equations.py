import pytest

from mwpgen.data.equations import EquationError, equation_string, normalize_equation, tokenize


def norm(eq: str) -> str:
    return equation_string(normalize_equation(eq))


@pytest.mark.parametrize("source, expected", [
    ("X=(70.0-27.0)", "x = ( 70.0 - 27.0 )"),                  # Arithmetic, Table 1's example
    ("x=56*9", "x = 56 * 9"),                                  # MAWPS
    ("X=((91.0 + 24.0) - (6.0 + 11.0))", "x = ( ( 91.0 + 24.0 ) - ( 6.0 + 11.0 ) )"),  # spaces
    ("56*9=x", "x = 56 * 9"),                                  # expr = x
    ("x=1999+999^2", "x = 1999 + 999 ^ 2"),
    ("hours=4.0*0.5/3.0", "x = 4.0 * 0.5 / 3.0"),              # MAWPS names its unknown
])
def test_normalises_to_x_equals_expr(source, expected):
    assert norm(source) == expected


def test_percent_is_one_number_symbol():
    assert tokenize("x=(24+24*150%)/(1-96%)") == ["x", "=", "(", "24", "+", "24", "*", "150%", ")", "/",
                                                  "(", "1", "-", "96%", ")"]


def test_fraction_is_five_symbols_until_masking_decides():
    assert norm("x=48/(1/3)") == "x = 48 / ( 1 / 3 )"


def test_square_brackets_become_parentheses():
    assert norm("x=[490-50*(4+1)]/4") == "x = ( 490 - 50 * ( 4 + 1 ) ) / 4"


def test_full_width_characters_are_folded():
    assert norm("x＝（３+４）*1") == "x = ( 3 + 4 ) * 1"


def test_unary_minus_is_accepted_and_kept_as_a_symbol():
    assert norm("number=1.477/-7.0") == "x = 1.477 / - 7.0"
    assert norm("x=(14.0--10.0)/(3.0+1.0)") == "x = ( 14.0 - - 10.0 ) / ( 3.0 + 1.0 )"


@pytest.mark.parametrize("source, reason", [
    ("=56*9", "no_unknown"),
    ("70-27=43", "no_unknown"),
    ("x=y+1", "multiple_unknowns"),
    ("X-9=4", "unknown_inside"),
    ("7=3+x", "unknown_inside"),
    ("(7.0*x)+4.0=(3.0*x)-20.0", "unknown_inside"),
    ("x=x*2", "unknown_inside"),
    ("x=(1+2", "unparsable"),                 # unbalanced
    ("x=[1+2)", "unparsable"),                # mismatched bracket kinds
    ("x=1+2)", "unparsable"),
    ("x=80千米/小时", "unparsable"),            # stray characters (Math23K id 10431)
    ("X=0.32=0.21", "unparsable"),            # two '='
    ("x=(1/6)0+1", "unparsable"),             # juxtaposition (Math23K id 17520)
    ("x=3(1/2)", "unparsable"),               # implicit multiplication / mixed number
    ("x=2*", "unparsable"),
    ("x=", "unparsable"),
    ("x 5", "unparsable"),                    # no '='
])
def test_failures_carry_a_reason(source, reason):
    with pytest.raises(EquationError) as info:
        normalize_equation(source)
    assert info.value.reason == reason
    assert info.value.detail and reason in str(info.value)


def test_variable_is_case_insensitive():
    assert norm("X=2") == "x = 2"
    with pytest.raises(EquationError) as info:
        normalize_equation("x=X+1")
    assert info.value.reason == "unknown_inside"  # x and X are the same unknown
