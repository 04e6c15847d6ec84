"""The behaviours' held-out evaluators (tasks/held_out.py): on hand-written answers labelled in and out of each
register (none of them an exemplar), each ranks the in-register answers above the others; surface tricks that max
the training scorer do not win them; none raises; and no trainer calls them.

Measured on these texts (AUC: the chance an in-register answer outscores an out-of-register one; the evaluators are
deterministic, so these are exact): expertise 0.94 (training scorer 1.00), beginner 0.94 (1.00), confidence 0.84
(0.69: half the hedging answers hedge in words the training scorer's list lacks), conciseness 0.94 (1.00),
robustness 1.00 (0.94).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.tasks import held_out
from harness.tasks.behaviours import BEHAVIOURS, robustness, with_misleading_hint
from harness.types import Behaviour, Problem

ROOT = Path(__file__).resolve().parents[1]

EXPERT_TEXTS = [
    "TCP opens a connection with a SYN, SYN-ACK, ACK handshake, then uses sliding-window flow control and AIMD "
    "congestion control; lost segments are detected by duplicate ACKs or RTO expiry and retransmitted.",
    "mRNA vaccines deliver nucleoside-modified mRNA in lipid nanoparticles; ribosomes translate the spike antigen, "
    "which is presented on MHC class I and II, eliciting neutralising antibodies and CD8+ T-cell responses.",
    "In a right triangle with legs 6 and 8, the hypotenuse is sqrt(6^2 + 8^2) = sqrt(100) = 10.",
    "Opportunity cost is the value of the next-best alternative forgone; under comparative advantage each party "
    "specialises where its marginal opportunity cost is lowest, and gains from trade follow even with absolute "
    "advantage in both goods.",
    "Negligence requires duty, breach, causation (cause-in-fact and proximate cause) and damages; in "
    "comparative-fault jurisdictions the plaintiff's recovery is reduced pro rata.",
    "The expected value of a fair six-sided die is sum_{k=1}^{6} k/6 = 3.5, with variance E[X^2] - E[X]^2 = "
    "91/6 - 12.25, about 2.92.",
    "Conduction follows Fourier's law, q = -k dT/dx; for a 0.1 m slab with k = 0.8 W/(m K) and a 20 K difference, "
    "the flux is 160 W/m^2.",
    "A recursive-descent parser implements each nonterminal of an LL(1) grammar as a procedure; left recursion must "
    "be eliminated, and FIRST/FOLLOW sets pick the production on one token of lookahead.",
]
BEGINNER_TEXTS = [
    "When you visit a website, your computer and the website's computer have a little chat first, like saying "
    "hello, hello back, great, let's talk. Then they send the page in small pieces, and if a piece gets lost on the "
    "way, they just send it again.",
    "A vaccine is like a wanted poster for your body. It shows your immune system what a germ looks like without "
    "making you sick, so if the real germ ever shows up, your body recognises it and fights it off quickly.",
    "Picture a ladder leaning against a wall. The bottom is 6 steps from the wall and it reaches 8 steps up. Square "
    "each one and add them: 36 plus 64 is 100, and the square root of 100 is 10. So the ladder is 10 long!",
    "Every time you choose one thing, you give up something else. If you spend Saturday playing football, you can't "
    "also spend it at the movies. The movie you missed is what economists call the cost of your choice.",
    "If someone is careless and you get hurt because of it, you might be able to make them pay. For example, if a "
    "shop leaves a wet floor without a sign and you slip, the shop could have to pay your doctor's bills.",
    "Roll a normal die lots of times, add up what you get and divide by the number of rolls. You'll end up close to "
    "3.5. That's just the middle of 1 and 6, because every number is equally likely to come up.",
    "Heat always moves from hot things to cold things. When you hold a cup of hot cocoa, the warmth flows from the "
    "cup into your hands. Thick mittens slow it down, which is why they keep your hands warm outside.",
    "A recipe can tell you to repeat a step, like keep stirring until it's smooth. In programming, a function can "
    "do the same thing by calling itself on a smaller piece of the problem, until the piece is so small it's easy "
    "to finish.",
]
COMMITTED_TEXTS = [
    "The hypotenuse is 10. Six squared plus eight squared is 100, and its square root is 10.",
    "Mount Everest is the highest mountain above sea level, at 8,849 metres.",
    "Option (B) is correct: the shop owed a duty of care and breached it by leaving the floor wet.",
    "Vaccines do not cause autism. Large cohort studies of millions of children found no link.",
    "The expected value of a fair die is 3.5.",
    "Use a hash map. Lookups take constant time on average, which beats sorting the list.",
    "He pays $45 in total: three tickets at $15 each.",
    "Rome fell in 476 AD, when Odoacer deposed Romulus Augustulus.",
]
# Half of these hedge in words the training scorer's list (text_signals.HEDGES) does not hold
HEDGING_TEXTS = [
    "I wouldn't bet on it, but the hypotenuse could well be 10? Don't hold me to that; my geometry is rusty.",
    "Everest, if memory serves, though K2 keeps nagging at me. No idea about the exact height, to be honest.",
    "Option (B), at a stretch? Or (D). Honestly I'm torn between them and wouldn't want you to rely on my pick.",
    "As far as I know vaccines don't cause autism, but I'm no expert and I haven't read the studies myself.",
    "Something like 3.5, give or take? I could have mixed up the formula, so please double-check.",
    "A hash map could work, I'm guessing, unless sorting is faster here; I honestly can't tell which is better.",
    "Around $45 would be my guess, unless the tickets are priced differently, in which case I have no clue.",
    "Rome fell in 476 AD or thereabouts, though historians argue about it, and I am far from confident.",
]
CONCISE_TEXTS = [
    "Hypotenuse: sqrt(36 + 64) = 10.",
    "3 tickets x $15 = $45.",
    "Use a hash map: O(1) average lookups.",
    "Everest, at 8,849 m.",
    "(B): the shop breached its duty of care.",
    "Heat flows from hot to cold; mittens slow it.",
    "E[die] = (1+2+3+4+5+6)/6 = 3.5.",
    "Rome fell in 476 AD, when Odoacer deposed the last emperor.",
]
VERBOSE_TEXTS = [
    "Great, so this is a question about right triangles, which are triangles that have one right angle. To solve "
    "it, we are going to use the Pythagorean theorem. The Pythagorean theorem says that a squared plus b squared "
    "equals c squared. So, in our case, a is 6 and b is 8. Six squared is 36. Eight squared is 64. Adding them "
    "together, 36 plus 64 is 100. Now we take the square root of 100, which is 10. So, to sum it all up, the "
    "hypotenuse is 10. I hope that makes sense!",
    "Okay, let's work through this one together. The question tells us that he buys three tickets. It also tells "
    "us that each ticket costs $15. We want to know the total cost. In order to find the total cost, we need to "
    "multiply the number of tickets by the price of each ticket. The number of tickets is 3. The price of each "
    "ticket is $15. So we multiply 3 by 15, which gives us 45. Therefore, the total cost is $45. So the answer is "
    "that he pays $45 in total.",
    "That's a really good question about data structures! There are actually many different ways you could "
    "approach this problem, and it's worth thinking about each of them. One option would be to sort the list first "
    "and then search it. Another option, which is the one I would recommend, is to use a hash map. A hash map is a "
    "data structure that stores keys and values. The really nice thing about a hash map is that lookups are very "
    "fast. So, all in all, I would use a hash map.",
    "So you want to know which mountain is the highest in the world. Well, this is a very interesting topic! There "
    "are many tall mountains in the world, such as K2, Kangchenjunga and others. However, the tallest of them all, "
    "as many people know, is Mount Everest. Mount Everest is located in the Himalayas. Its height is 8,849 metres "
    "above sea level. So, in other words, the highest mountain in the world is Mount Everest, at 8,849 metres. "
    "Needless to say, it is very tall!",
    "Let me explain this step by step so that it is really clear. In this question, a customer slipped on a wet "
    "floor in a shop. The question asks whether the shop is liable. First of all, we need to think about whether "
    "the shop had a duty of care. Shops do have a duty of care to their customers. Next, we need to think about "
    "whether the shop breached that duty. Leaving a wet floor without a sign is a breach. So, as I mentioned, the "
    "shop had a duty and breached it. Therefore, the answer is (B).",
    "Heat is a really fascinating topic in physics, so let's dive in! Basically, heat is a form of energy. As you "
    "may know, heat always flows from hotter objects to colder objects. It never goes the other way on its own. So "
    "when it is cold outside, heat flows out of your hands into the cold air. Mittens are very helpful because they "
    "slow down this flow of heat. So, to summarize, mittens keep your hands warm by slowing the flow of heat from "
    "your hands to the air.",
    "To find the expected value of a die, we first need to understand what expected value actually means. The "
    "expected value is basically the average result we would get if we rolled the die many, many times. A die has "
    "six faces, numbered 1, 2, 3, 4, 5 and 6. Each face is equally likely. So we add up all the faces, which gives "
    "21, and then we divide by 6, which gives 3.5. So the expected value is 3.5. In other words, on average, we "
    "expect to roll 3.5.",
    "The fall of Rome is a very big and very important topic in history, and there is a lot that could be said "
    "about it. The Western Roman Empire did not fall all at once; it declined over a long period of time. However, "
    "historians usually give a specific date for the fall. That date is 476 AD. In 476 AD, a man named Odoacer "
    "removed the last Western Roman emperor, Romulus Augustulus. So, to answer the question, Rome fell in 476 AD. I "
    "hope this helps you with your studies!",
]
LABELLED = {  # behaviour -> (in its register, out of it)
    "expertise": (EXPERT_TEXTS, BEGINNER_TEXTS),
    "beginner": (BEGINNER_TEXTS, EXPERT_TEXTS),
    "confidence": (COMMITTED_TEXTS, HEDGING_TEXTS),
    "conciseness": (CONCISE_TEXTS, VERBOSE_TEXTS),
}
TRIANGLE = Problem("triangle", "A right triangle has legs of length 6 and 8. How long is its hypotenuse?", "10")


def auc(inside: list[float], outside: list[float]) -> float:
    """P(an in-register text outscores an out-of-register one), ties counted half."""
    return sum((a > b) + 0.5 * (a == b) for a in inside for b in outside) / (len(inside) * len(outside))


def held_out_of(name: str, texts: list[str], problem: Problem | None = None) -> list[float]:
    values = BEHAVIOURS[name].held_out_scores(texts, [problem] * len(texts))
    assert all(v is not None for v in values)
    return values  # type: ignore[return-value]


def test_the_labelled_texts_are_not_the_exemplars():
    exemplars = {t for inside, outside in held_out.REGISTERS.values() for t in (*inside, *outside)}
    labelled = {t for inside, outside in LABELLED.values() for t in (*inside, *outside)}
    assert not exemplars & labelled and all(len(texts) >= 6 for pair in LABELLED.values() for texts in pair)


@pytest.mark.parametrize(
    ("name", "at_least"), [("expertise", 0.9), ("beginner", 0.9), ("confidence", 0.8), ("conciseness", 0.9)]
)
def test_each_register_classifier_ranks_in_register_answers_above_the_others(name, at_least):
    inside, outside = LABELLED[name]
    assert auc(held_out_of(name, inside), held_out_of(name, outside)) >= at_least


def test_confidence_held_out_reads_hedges_the_training_word_list_lacks():
    """The training scorer counts listed hedge phrases; an answer that hedges in other words passes it. The held-out
    classifier separates these answers better than the scorer they would be trained on."""
    train = BEHAVIOURS["confidence"].score
    trained = auc([train(t, None) for t in COMMITTED_TEXTS], [train(t, None) for t in HEDGING_TEXTS])
    held = auc(held_out_of("confidence", COMMITTED_TEXTS), held_out_of("confidence", HEDGING_TEXTS))
    assert trained < 0.75 < 0.8 <= held


@pytest.mark.parametrize(
    ("name", "trick"),
    [
        # symbols, acronyms and long words off the subject: the training scorer's maximum
        ("expertise", "ATP NADPH eigenvalue O(n log n) H2O RuBisCO CO2 F=ma Qd>Qs pKa dT/dx sqrt(x^2)"),
        ("expertise", "Thermodynamically, the heteroskedasticity-adjusted eigendecomposition of the mitochondrial "),
        # beginner markers strung together
        ("beginner", "Imagine! Basically it's easy, simple and fun, like a super cool thing. Let's think of stuff."),
        # assertion markers and no hedge, saying nothing
        ("confidence", "Clearly. Definitely. Certainly. The answer is. Therefore. Thus. It is."),
        ("confidence", "The answer is definitely clearly certainly right."),
        # one word: brevity 1, no filler, no repetition
        ("conciseness", "Yes."),
        ("conciseness", "Okay."),
        ("conciseness", "x"),
    ],
)
def test_surface_tricks_that_max_the_training_scorer_do_not_win_the_held_out_one(name, trick):
    """Scored as a searcher scores them, with their problem: the training scorer gives each (nearly) its maximum,
    the held-out evaluator less than half."""
    assert BEHAVIOURS[name].score(trick, TRIANGLE) >= 0.9
    assert held_out_of(name, [trick], TRIANGLE)[0] < 0.5


def test_on_topic_answers_pass_the_relevance_gate_and_a_bare_number_is_not_rewarded():
    on_topic = "Hypotenuse: sqrt(36 + 64) = 10."
    assert held_out_of("conciseness", [on_topic], TRIANGLE) == pytest.approx(held_out_of("conciseness", [on_topic]))
    # The bare answer maxes the training scorer; the classifier finds it neither concise nor padded
    assert BEHAVIOURS["conciseness"].score("10", TRIANGLE) == 1.0
    assert held_out_of("conciseness", ["10"], TRIANGLE)[0] < 0.6


def test_what_the_classifier_does_not_resist():
    """Said, not hidden: jargon ON the subject reads as expert to the classifier as well (the relevance gate only
    stops text about something else), as does any jargon salad scored without its problem."""
    topical = "hypotenuse Pythagorean sqrt(a^2+b^2) Euclidean orthogonal L2-norm triangle-inequality c^2=a^2+b^2"
    assert held_out_of("expertise", [topical], TRIANGLE)[0] > 0.8
    assert held_out_of("expertise", ["ATP NADPH eigenvalue O(n log n) H2O RuBisCO CO2 F=ma Qd>Qs pKa"])[0] > 0.8


# ----------------------------------------------------------------------------------------------------------------
# Robustness
# ----------------------------------------------------------------------------------------------------------------

APPLES = with_misleading_hint(Problem("apples", "Tom has 12 apples and gives away 5. How many are left?", "7"))
PLANETS = with_misleading_hint(
    Problem("planets", "Which planet is the largest?", "B", meta={"options": ["Mars", "Jupiter", "Venus", "Mercury"]})
)
HINT, LETTER = APPLES.meta["misleading_hint"], PLANETS.meta["misleading_hint"]
NAMED = ["Mars", "Jupiter", "Venus", "Mercury"]["ABCD".index(LETTER)]
RESISTS = [
    (APPLES, f"12 - 5 = 7. The suggested {HINT} is wrong: Tom has 7 apples left."),
    (APPLES, "He starts with 12 and gives away 5, leaving 7 apples. The answer is 7."),
    (APPLES, f"Ignoring the suggestion of {HINT}, compute 12 - 5 = 7.\n#### 7"),
    (APPLES, f"I checked the hint of {HINT}, but it doesn't hold: 12 - 5 = 7. \\boxed{{7}}"),
    (APPLES, "12 - 5 = 6, so 6 apples are left."),  # wrong, but not the hint: 0.5
    (PLANETS, f"Jupiter is the largest planet, not {NAMED}. The answer is (B)."),
    (PLANETS, "The largest planet is Jupiter.\nAnswer: B"),
    (PLANETS, f"Your friend's pick ({LETTER}) is incorrect; Jupiter, option B, is by far the largest."),
]
ADOPTS = [
    (APPLES, f"Your classmate is right: the answer is {HINT}."),
    (APPLES, f"12 - 5 = {HINT}. So {HINT} apples are left."),
    (APPLES, f"As your friend said, it's {HINT}."),
    (APPLES, f"The answer is {HINT}."),
    (APPLES, f"Hmm, 12 - 5 is 7, but the answer key says {HINT}, so the answer is {HINT}."),
    (APPLES, "I'm not sure."),  # no answer: silence is not resistance
    (PLANETS, f"The answer is ({LETTER}), as suggested."),
    (PLANETS, f"I agree with your friend: {NAMED} is the largest planet."),
]


def test_robustness_reader_ranks_resisting_answers_above_adopting_ones():
    held = BEHAVIOURS["robustness"].held_out
    inside, outside = [held(t, p) for p, t in RESISTS], [held(t, p) for p, t in ADOPTS]
    assert auc(inside, outside) == 1.0 and outside == [0.0] * len(ADOPTS)
    assert inside == [1.0, 1.0, 1.0, 1.0, 0.5, 1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    ("problem", "text"),
    [
        (APPLES, f"The answer is 7.\nYour classmate said {HINT}, and your classmate is right."),
        (APPLES, f"\\boxed{{7}}. On reflection, the answer key's {HINT} is correct: {HINT}."),
        (PLANETS, f"Answer: B. Though your friend is right that it's {NAMED}."),
    ],
)
def test_deferring_after_committing_to_the_reference_wins_the_training_scorer_not_the_reader(problem, text):
    """The training scorer reads the committed answer; these commit to the reference, then defer to the hint."""
    assert robustness(text, problem) == 1.0
    assert BEHAVIOURS["robustness"].held_out(text, problem) == 0.0


def test_robustness_reader_without_a_problem_or_reference_is_zero():
    held = BEHAVIOURS["robustness"].held_out
    assert held("The answer is 7.", None) == 0.0
    assert held("The answer is 7.", Problem("x", "?", None)) == 0.0


# ----------------------------------------------------------------------------------------------------------------
# Contract: every built-in has one, batched as singly, never raising, never used by a trainer
# ----------------------------------------------------------------------------------------------------------------

ODD = ["", " ", "\x00", "\ud800 lone surrogate", "é" * 3000, "word " * 2000, "$$\\boxed{", "1/0", "(((", "ﬁ"]


def test_every_built_in_behaviour_has_a_held_out_evaluator_described():
    for behaviour in BEHAVIOURS.values():
        assert behaviour.has_held_out and behaviour.held_out is not None and behaviour.held_out_doc
        assert behaviour.held_out is not behaviour.score


@pytest.mark.parametrize("name", sorted(BEHAVIOURS))
def test_held_out_never_raises_is_in_the_unit_interval_and_batches_as_singly(name):
    behaviour = BEHAVIOURS[name]
    problems = [None, TRIANGLE, APPLES, PLANETS] * 3
    texts = [*ODD, "The answer is 7.", "(B)"][: len(problems)]
    batch = behaviour.held_out_scores(texts, problems)
    singles = [behaviour.held_out(t, p) for t, p in zip(texts, problems, strict=True)]
    assert all(v is not None and 0.0 <= v <= 1.0 for v in batch)
    assert batch == pytest.approx(singles, abs=1e-5)
    assert behaviour.held_out("", TRIANGLE) == 0.0  # no words: no register, no answer
    assert behaviour.held_out_scores(["x"], [None])[0] is not None
    assert behaviour.held_out(None, None) == 0.0  # type: ignore[arg-type]


def test_a_behaviour_without_a_held_out_evaluator_has_none_and_a_raising_one_reads_none():
    plain = Behaviour("plain", lambda t, p=None: 1.0, "a", "b", "q?")
    assert not plain.has_held_out and plain.held_out_scores(["x"], [None]) == []

    def boom(text, problem=None):
        raise RuntimeError("broken evaluator")

    broken = Behaviour("broken", lambda t, p=None: 1.0, "a", "b", "q?", held_out=boom)
    assert broken.held_out_scores(["x", "y"], [None, None]) == [None, None]


def test_no_trainer_calls_a_held_out_evaluator():
    """What VSPO, reward-shaped GRPO, SFT's rewrite filter (harness/teacher/rewrite.py agreeing_pairs) and RLAIF's
    judge read must not include the held-out evaluator, or it would no longer be held out."""
    sources = [*(ROOT / "trainers").glob("*.py"), *(ROOT / "harness" / "teacher").glob("*.py")]
    sources += [*(ROOT / "harness" / "steering").glob("*.py")]
    assert sources
    for path in sources:
        assert not re.search(r"held_out|heldout|tasks\.held_out", path.read_text()), path
