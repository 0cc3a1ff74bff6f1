import pytest

from mwpgen.data.equations import EquationError
from mwpgen.data.masking import MaskingError, format_number, mask_problem, split_text


def test_table1_example():
    m = mask_problem("Joan found 70.0 seashells on the beach . She gave Sam some of her seashells . "
                     "She has 27.0 seashells . How many seashells did she give to Sam ?", "X=(70.0-27.0)")
    assert m.text.startswith("Joan found num1 seashells on the beach . She gave Sam")
    assert "She has num2 seashells" in m.text
    assert m.equation == "x = ( num1 - num2 )"
    assert m.numbers == ["70.0", "27.0"]


def test_numbering_follows_text_order_not_equation_order():
    m = mask_problem("He had 5 apples and bought 3 more .", "x=3+5")
    assert m.equation == "x = num2 + num1"
    assert m.numbers == ["5", "3"]


def test_equal_values_share_a_token_70_0_vs_70():
    m = mask_problem("Tom has 70 cards . Ann has 70.0 cards and 4 boxes .", "x=70.0*4")
    assert m.text == "Tom has num1 cards . Ann has num1 cards and num2 boxes ."
    assert m.equation == "x = num1 * num2"
    assert m.numbers == ["70", "4"]


def test_repeated_number_in_equation():
    m = mask_problem("A box holds 6 eggs .", "x=6*6")
    assert m.equation == "x = num1 * num1"


def test_thousands_separator():
    m = mask_problem("1,250  people visited . 3 times as many came on Friday .", "X=(1250.0 / 3.0)")
    assert m.text == "num1 people visited . num2 times as many came on Friday ."
    assert m.numbers == ["1,250", "3"]
    assert m.equation == "x = ( num1 / num2 )"


def test_decimals_and_trailing_period():
    m = mask_problem("It costs $9.95. He pays 0.5 of it.", "x=9.95*0.5")
    assert m.text == "It costs $ num1 . He pays num2 of it ."
    assert m.equation == "x = num1 * num2"


def test_punctuation_is_split_but_clitics_and_alnum_words_stay():
    assert split_text("Carrie's mom  gave her $91 on the beach.") == \
        ["Carrie", "'s", "mom", "gave", "her", "$", "91", "on", "the", "beach", "."]
    assert split_text("his mp3.0 player and the w8 of H1") == ["his", "mp3.0", "player", "and", "the", "w8", "of", "H1"]


def test_numbers_glued_to_words():
    m = mask_problem("He ran 60kph on the 8th day of a 5.0-day trip .", "x=60*8*5")
    assert m.text == "He ran num1 kph on the num2 th day of a num3 - day trip ."
    assert m.equation == "x = num1 * num2 * num3"


def test_spaced_fraction_in_text_is_one_number_and_collapses_in_equation():
    m = mask_problem("He read ( 1 / 6 ) of the book , 24 pages .", "x=24/(1/6)")
    assert m.text == "He read num1 of the book , num2 pages ."
    assert m.numbers == ["(1/6)", "24"]
    assert m.equation == "x = num2 / num1"


def test_bare_fraction_in_text():
    m = mask_problem("Use 3/4 of 20 kg .", "x=20*3/4")
    assert m.numbers == ["3/4", "20"]
    assert m.equation == "x = num2 * num1"  # `* 3 / 4` read as one number keeps the value


def test_bare_fraction_after_division_is_not_collapsed():
    with pytest.raises(MaskingError):  # 20/3/4 != 20/(3/4): 3 and 4 are not text numbers
        mask_problem("Use 3/4 of 20 kg .", "x=20/3/4")


def test_division_of_two_text_numbers_stays_a_division():
    m = mask_problem("Tom has 70.0 apples in 7.0 bags .", "X=(70.0/7.0)")
    assert m.equation == "x = ( num1 / num2 )"


def test_percent_in_text_matches_percent_in_equation():
    for text in ("It rose by 96 % this year from 50 .", "It rose by 96% this year from 50 ."):
        m = mask_problem(text, "x=50*(1+96%)")
        assert m.text == "It rose by num1 this year from num2 ."
        assert m.numbers == ["96%", "50"]
        assert m.equation == "x = num2 * ( 1 + num1 )"


def test_decimal_in_equation_matches_text_percent_by_value():
    m = mask_problem("It rose by 96 % from 50 .", "x=50*0.96")
    assert m.equation == "x = num2 * num1"


def test_mawps_style_percent_is_split_when_equation_uses_the_bare_number():
    m = mask_problem("It pays an annual interest rate of 3 % on 70 dollars .", "x=70.0*3.0*0.01")
    assert m.text == "It pays an annual interest rate of num1 % on num2 dollars ."
    assert m.numbers == ["3", "70"]
    assert m.equation == "x = num2 * num1 * 0.01"


def test_constants_only_in_the_equation_are_written_normalised():
    m = mask_problem("It costs 390 after 40 % off .", "x=390/(1.0-40%)")
    assert m.equation == "x = num1 / ( 1 - num2 )"
    m = mask_problem("A circle has radius 2 .", "x=3.14*2^2", constants=("3.14",))
    assert m.equation == "x = 3.14 * num1 ^ num1"  # masking is by value: both 2s are the text's 2


def test_constant_in_text_is_masked():
    m = mask_problem("Add 1 to 5 .", "x=5+1")
    assert m.equation == "x = num2 + num1"


def test_unmatched_number_names_the_number():
    with pytest.raises(MaskingError) as info:
        mask_problem("Sara has saved 11 quarters .", "x=11*25")
    assert info.value.reason == "unmatched_number"
    assert "25" in info.value.detail


def test_undeclared_constant_is_unmatched():
    with pytest.raises(MaskingError):
        mask_problem("He has 3 dozen eggs .", "x=3*12", constants=("1",))
    assert mask_problem("He has 3 dozen eggs .", "x=3*12", constants=("12",)).equation == "x = num1 * 12"


def test_negative_numbers_fold_the_unary_minus():
    m = mask_problem("-7 times a number is 1.477 .", "number=1.477/-7.0")
    assert m.numbers == ["-7", "1.477"]
    assert m.equation == "x = num2 / num1"
    m = mask_problem("The difference of 14 and 3 times a number is the sum of the number and -10 .",
                     "x=(14.0--10.0)/(3.0+1.0)")
    assert m.equation == "x = ( num1 - num3 ) / ( num2 + 1 )"


def test_hyphen_inside_words_is_not_a_sign():
    assert split_text("a small-scale 5-day trip") == ["a", "small", "-", "scale", "5", "-", "day", "trip"]


def test_math23k_scale_factors():
    text = "The price is 280000 yuan , paying 20000 yuan a year ."
    with pytest.raises(MaskingError):
        mask_problem(text, "x=28/2")
    m = mask_problem(text, "x=28/2", scales=(10**4, 10**8))
    assert m.equation == "x = num1 / num2"
    m = mask_problem("It invested 3.5 1000000 yuan , then 3.01 1000000 yuan .", "x=301/350", scales=(10**4,))
    assert m.numbers == ["3.5 1000000", "3.01 1000000"]
    assert m.equation == "x = num2 / num1"


def test_scaled_match_does_not_replace_the_complement_1():
    m = mask_problem("It was 10000 yuan , 25 % more than now .", "x=10000/(1+25%)", scales=(10**4,))
    assert m.equation == "x = num1 / ( 1 + num2 )"


def test_number_words_rescue_only_when_needed():
    m = mask_problem("Xiaohong ranked eighth , with 3 friends .", "x=8-1")
    assert m.text == "Xiaohong ranked num1 , with num2 friends ."
    assert m.numbers == ["eighth", "3"]
    assert m.equation == "x = num1 - 1"
    # not needed -> left as a word
    assert mask_problem("Xiaohong ranked eighth , with 3 friends .", "x=3-1").text.startswith("Xiaohong ranked eighth")


def test_equation_errors_propagate():
    with pytest.raises(EquationError) as info:
        mask_problem("Jason gave 9 and has 4 .", "X-9=4")
    assert info.value.reason == "unknown_inside"


@pytest.mark.parametrize("value, text", [("1.0", "1"), ("100.00", "100"), ("0.01", "0.01"), ("3.140", "3.14")])
def test_format_number(value, text):
    from fractions import Fraction
    assert format_number(Fraction(value)) == text


def test_zero_denominator_is_not_a_fraction():
    assert split_text("a (1/0) b ( 2 / 0 )") == ["a", "(", "1", "/", "0", ")", "b", "(", "2", "/", "0", ")"]
