r"""The notation registry: every symbol the lecture notes print, each with one meaning.

Each entry is a :class:`~derivations.notation.Symbol`: the symbol as printed,
its one meaning, the page that defines it, its name in code, and why the
letter was chosen.  The Notation page is generated from :data:`SYMBOLS`, and
the build fails when a page prints a letter that is neither global here nor
declared local to that page (``docs/_ext/notation.py``).

A letter is *global* when it means the same on every page; a letter that only
one page needs is *local* to it (``local=True``) and is shown in that page's
"Local notation" box.  Two pages may give a letter two local meanings; no page
may give a global letter a second one.  How a chapter or a method declares its
symbols is described in ``CONTRIBUTING.md`` ("Declaring notation").
"""

from __future__ import annotations

from .notation import Symbol

__all__ = ["SYMBOLS"]

_POLICY = "Policies, actions and responses"
_SCORE = "Scores, rewards and estimators"
_GROUP = "Groups and batches"
_RETURNS = "Steps, returns and values"
_RATIO = "Ratios, clips and weights"
_KL = "Samplers, penalties and distances"
_COUNT = "Sizes, indices and constants"

GLOBAL = [
    # ------------------------------------------------------------------ policies
    Symbol(r"\theta", r"the policy's parameters (the logits of the toy LM); :math:`\theta_a` the logit of action :math:`a`",
           "score_function", "``theta``, ``TinyLM.theta0``", "the field's letter for policy parameters", _POLICY,
           forms=(r"\theta_a", r"\theta_0")),
    Symbol(r"\theta_{\mathrm{old}}", "the parameters that sampled the batch of a PPO-style update", "gradient_weights",
           "``theta_old``", r"PPO's :math:`\theta_{\mathrm{old}}`", _POLICY),
    Symbol(r"\pi", r"the policy being trained, :math:`\pi_\theta`; :math:`\pi_a` (or :math:`\pi(a)`) the probability of action :math:`a`",
           "score_function", "``log_prob`` (its log)", "the field's letter for a policy", _POLICY,
           forms=(r"\pi_\theta", r"\pi_a", r"\pi(o_t \mid o_{<t})")),
    Symbol(r"\pi_{\mathrm{old}}", "the policy that sampled the batch of a PPO-style update", "gradient_weights",
           "``old_log_prob``", "PPO's name for it", _POLICY),
    Symbol(r"\pi_{\mathrm{ref}}", "the reference policy of a KL penalty (the model before RL)", "score_function",
           "``ref_log_prob``", "the RLHF papers' name for it", _POLICY),
    Symbol(r"\pi'", r"the policy of a second decision, chosen after :math:`a`: :math:`\pi'(a' \mid a)` (or, after a state, "
           r":math:`\pi'(a' \mid x')`)", "score_function", "``prefix_baseline``, ``environment_gradient``, "
           "``past_reward_score_vanishes`` (``derivations``)", "a prime marks the second step, as :math:`a'` does", _POLICY),
    Symbol(r"\mu", "the sampler (behaviour policy) that produced the tokens: an inference engine, a lagging copy, "
           r":math:`\pi_{\mathrm{old}}`", "off_policy", "``sampler_log_prob``", "the off-policy literature's behaviour policy", _POLICY,
           forms=(r"\mu_a", r"\mu(o_t \mid o_{<t})")),
    Symbol("K", r"the number of actions of a softmax policy (written :math:`K = j + n`, :math:`n \ge 0`, where a "
           r"derivation needs :math:`K \ge j`)", "score_function", "``K``", "capital for a count, as :math:`G`, :math:`T`, :math:`B`",
           _POLICY),
    Symbol("a", r"an action; actions are labels :math:`1, \dots, K` (row :math:`a - 1` in code)", "score_function",
           "row index", "the RL letter for an action", _POLICY),
    Symbol("a'", "the action of a second decision, after :math:`a`", "score_function",
           "``a2`` in examples", "a prime marks the second step", _POLICY),
    Symbol("a''", "a third action, or a second action summed beside :math:`a'`", "baselines", "", "two primes", _POLICY),
    Symbol("o", r"a response, :math:`o = (o_0, \dots, o_{T-1})`; :math:`o_t` its token at position :math:`t`, "
           ":math:`o_{<t}` the prefix, :math:`|o|` its length; :math:`o_i` answer :math:`i` of a group",
           "conventions", "``tokens``, ``TinyLM.tokens``", "o for output, as in the GRPO paper", _POLICY,
           forms=("o_t", "o_{<t}", "|o|", "o_i", "o_{i,t}")),
    Symbol("x'", "the state the environment moves to in the two-step MDP", "score_function",
           "``environment_gradient`` (``M`` states)", "a prime marks the second step", _POLICY),
    Symbol(r"\mathbf{e}", r"the one-hot vector: :math:`\mathbf{e}_a` is 1 in coordinate :math:`a` (the score of a softmax is "
           r":math:`\mathbf{e}_a - \pi`)", "score_function", "``torch.nn.functional.one_hot``",
           "bold, as a vector; :math:`e` is Euler's number", _POLICY, forms=(r"\mathbf{e}_a",)),
    Symbol("e", "Euler's number", "gradient_weights", "``math.e``", "the constant's standard name", _COUNT),
    # ------------------------------------------------------------------ scores, rewards, estimators
    Symbol("s", r"a score: :math:`s_t = \nabla_\theta\log\pi_\theta(o_t \mid o_{<t})` of position :math:`t`, "
           r":math:`s(o) = \sum_t s_t` of a response, :math:`s_i` of answer :math:`i`; :math:`s_j(a)` its coordinate :math:`j`",
           "score_function", "``score_matrix``, ``token_score_tensor``", "s for score, as in the statistics literature", _SCORE,
           forms=("s_t", "s(o)", "s_i")),
    Symbol("R", "a reward, always capital: :math:`R` of a response, :math:`R_i` of answer :math:`i`, :math:`R_t` of step "
           ":math:`t`, :math:`R(a)` of action :math:`a`", "score_function", "``rewards``, ``default_reward``",
           "capital, so that the small :math:`r` is free for the importance ratio", _SCORE,
           forms=("R_i", "R_t", "R(a)")),
    Symbol("J", r"the objective, :math:`J(\theta) = \mathbb{E}_{o\sim\pi_\theta}[R(o)]`", "conventions",
           "``autograd_gradient``", "the RL literature's objective", _SCORE, forms=(r"J(\theta)",)),
    Symbol(r"\hat g", r"an estimator of :math:`\nabla_\theta J`", "baselines", "", "a hat for an estimate of the gradient :math:`g`",
           _SCORE, subscripts=True),
    Symbol("A", "an advantage: of a response, of answer :math:`i` (:math:`A_i`), of step :math:`t` (:math:`A_t`)",
           "baselines", "``advantages``", "the field's letter", _SCORE, forms=("A_i", "A_t", "A_{it}")),
    Symbol("b", "a baseline", "baselines", "``baseline``", "the field's letter", _SCORE),
    Symbol("b^*", "the variance-optimal constant baseline", "baselines", "``optimal_baseline``", "a star for the optimum", _SCORE),
    Symbol("V", r"a value: the expected reward :math:`V^\pi = \mathbb{E}_\pi[R]` of a prompt, or the critic's value "
           ":math:`V_t` of the observation before step :math:`t`", "baselines", "``value``", "the RL value function", _SCORE,
           forms=(r"V^\pi", "V_t", r"V_{\mathrm{old}}", r"V_{\mathrm{clip}}"), subscripts=True),
    Symbol("V'", "the critic's value of the observation after step :math:`t`, :math:`V'_t` (:math:`V_{t+1}` inside a trajectory)",
           "returns", "``next_value``", "a prime for the next observation", _RETURNS, forms=("V'_t",)),
    Symbol("Q", r"the expected reward after a first action, :math:`Q(a) = \mathbb{E}[R \mid a]` (a critic of the prefix and "
           "the action)", "baselines", "``CreditAssignment.Q``", "the RL action value", _SCORE, forms=("Q(a)", "Q_a")),
    Symbol(r"\mathcal{L}", r"a loss (minimised); :math:`\mathcal{L}_{\mathrm{PPO}}` that of a named method",
           "conventions", "``policy_loss``", "L for loss", _SCORE, subscripts=True),
    # ------------------------------------------------------------------ groups
    Symbol("G", "the size of a group of answers to one prompt", "group_baselines", "``G``", "GRPO's G", _GROUP),
    Symbol("S", "the number of successes among the other :math:`G - 1` answers of a group, "
           r":math:`S_{-i} = \sum_{j \ne i} R_j`", "group_baselines", "``OthersSucceed``",
           "S for a sum of Bernoulli rewards", _GROUP, forms=("S_{-i}",)),
    Symbol(r"\bar R", r"a mean reward: of the group, :math:`\bar R`; of the other answers, :math:`\bar R_{-i}`",
           "group_baselines", "``group_mean_advantages``, ``leave_one_out_baselines``", "a bar for a mean", _GROUP,
           forms=(r"\bar R_{-i}",), subscripts=True),
    Symbol(r"\sigma", r"a standard deviation (of a group's rewards; :math:`\sigma(p) = \sqrt{p(1-p)}` of a binary reward)",
           "group_baselines", "``std``", "the statistician's letter", _GROUP, subscripts=True),
    Symbol(r"\omega", r"the GRPO weight: the expected GRPO update is :math:`\omega(p, G)\,\nabla_\theta p`",
           "group_baselines", "``grpo_weight``", "a Greek w, for a weight that is not a token's :math:`w`", _GROUP,
           subscripts=True, forms=(r"\omega(p, G)",)),
    Symbol("c", r"the scale of an estimator's expected update, :math:`\mathbb{E}[A_i s_i] = c\,\nabla_\theta J + "
           r"\text{residual}`", "variants", "``GroupReport.scale`` (the report's column ``c``)", "c for a constant factor", _GROUP,
           forms=("c(p)",)),
    Symbol("B", "the number of sequences (rows) of a batch", "conventions", "``[B, T]``", "B for batch", _GROUP),
    Symbol(r"\kappa", r"the aggregation weight of a token in a loss, :math:`\kappa_{it} = \partial\,\mathcal{L}/\partial x_{it}`",
           "losses", "``token_weights``", "a Greek k, for the aggregation's coefficient", _GROUP),
    Symbol("D", r"the constant denominator of ``seq-mean-token-sum-norm``, :math:`\kappa = 1/D` (verl's ``loss_scale_factor``)",
           "losses", "``norm``", "D for denominator", _GROUP),
    # ------------------------------------------------------------------ steps and returns
    Symbol("T", r"the length of a response or an episode (the horizon); positions :math:`0, \dots, T-1`", "conventions",
           "``T``, ``rewards.shape[-1]``", "T for time", _RETURNS),
    Symbol("t", "a position (step) of a response, from 0", "conventions", "array index", "t for time", _RETURNS),
    Symbol("u", "a second position, beside :math:`t`", "conventions", "array index", "the letter after t", _RETURNS),
    Symbol(r"\gamma", r"the discount: step :math:`t` is weighted by :math:`\gamma^t`", "conventions", "``gamma``",
           "the RL discount", _RETURNS),
    Symbol(r"\lambda", r"the GAE / :math:`\lambda`-return parameter", "returns", "``lam``", "GAE's λ", _RETURNS),
    Symbol(r"\delta", r"the TD error :math:`\delta_t = R_t + \gamma(1 - d_t)V'_t - V_t`", "returns", "inside ``gae_advantages``",
           r"GAE's :math:`\delta_t`", _RETURNS, forms=(r"\delta_t",)),
    Symbol(r"\chi", r"the flag ``trace_cut`` of step :math:`t`, :math:`\chi_t` (1: the next entry is another trajectory)",
           "returns", "``trace_cut``", "a Greek c, for cut", _RETURNS, forms=(r"\chi_t",)),
    Symbol(r"\Gamma", r"the discount matrix, :math:`\Gamma_{tu} = \gamma^{u-t}\,\mathbb{1}[u \ge t]`", "returns", "",
           "a capital γ", _RETURNS),
    # ------------------------------------------------------------------ ratios, clips, weights
    Symbol("r", r"the importance ratio :math:`\pi_\theta/\pi_{\mathrm{old}}` of a token, :math:`r = e^{\ell - \ell_0}`",
           "gradient_weights", "``log_ratio`` (its log)", r"PPO's :math:`r_t(\theta)`", _RATIO, forms=("r_t", "r_{it}")),
    Symbol(r"\ell", r"a token's log-probability under :math:`\pi_\theta`; :math:`\ell_0 = \ell_{\mathrm{old}}` under "
           r":math:`\pi_{\mathrm{old}}`, :math:`\ell_{\mathrm{ref}}` under :math:`\pi_{\mathrm{ref}}`",
           "gradient_weights", "``log_prob``", "a script l for log", _RATIO, forms=(r"\ell_0", r"\ell_{\mathrm{old}}"),
           subscripts=True),
    Symbol(r"\varepsilon", r"the clip parameter of PPO-style losses; :math:`\varepsilon_l`, :math:`\varepsilon_h` its low and "
           r"high sides, the clip range :math:`[1 - \varepsilon_l, 1 + \varepsilon_h]`", "gradient_weights",
           "``eps_low``, ``eps_high``", "PPO's ε; l and h name the low and high side", _RATIO,
           forms=(r"\varepsilon_l", r"\varepsilon_h"), labels=("l", "h")),
    Symbol(r"\epsilon_{\mathrm{div}}", "a small constant that keeps a division finite (verl's ``1e-6``, ``1e-8``)",
           "group_baselines", "``eps``", "an ε with a name, not the clip parameter", _RATIO),
    Symbol("C_d", "the dual-clip constant: a token with :math:`A < 0` and :math:`r > C_d` is silenced "
           r"(:math:`C_d > 1 + \varepsilon_h`)", "gradient_weights", "``dual_clip`` (verl's ``clip_ratio_c``)",
           "Ye et al.'s c, with d for dual so that :math:`c` stays the scale", _RATIO, labels=("d",), bare=False),
    Symbol("C", r"a truncation cap on a ratio: a weight :math:`\min(\rho, C)`, and the cap of the excess-mass bound",
           "trust_region", "``cap``, the argument ``C`` of ``tv_gap``", "C for cap", _RATIO),
    Symbol("l", "the low end of a band of kept ratios :math:`[l, h]`", "off_policy", "``low``", "l for low", _RATIO),
    Symbol("h", "the high end of a band of kept ratios :math:`[l, h]`", "off_policy",
           "``high``", "h for high", _RATIO),
    Symbol("w", r"the gradient weight of a policy loss, :math:`\partial\,\mathcal{L}/\partial\ell = -w\,A`; "
           r":math:`w_{\mathrm{PPO}}` that of a named method", "gradient_weights", "``gradient_weight``, ``policy_weight``",
           "w for weight", _RATIO, subscripts=True, forms=("w(r, A)",)),
    Symbol(r"\hat r", r"the stopped weight of MiniMax-M1's unified form :math:`-\operatorname{sg}(\hat r)\,A\,\ell\,M`",
           "gradient_weights", "", r"MiniMax-M1's :math:`\hat r`", _RATIO),
    Symbol("M", "MiniMax-M1's token mask of the unified form (0 on PPO's silenced cells)", "gradient_weights",
           "``unified_mask``", "MiniMax-M1's :math:`M_{i,t}`", _RATIO),
    Symbol(r"\tilde r", r"a row's (sequence's) ratio, :math:`\tilde r_i = \exp(\frac1{n_i}\sum_t(\ell_{it} - \ell_{0,it}))` "
           r"(GSPO's); :math:`\tilde r_{it}` its straight-through token form", "losses", "``sequence_table``",
           "GSPO's :math:`s_i`, with a tilde over r because :math:`s` is the score", _RATIO, forms=(r"\tilde r_i",)),
    # ------------------------------------------------------------------ samplers and penalties
    Symbol(r"\rho", r"the sampler ratio :math:`\pi/\mu`: :math:`\rho_t` of a token, :math:`\rho` of a whole sequence "
           r"(the product over its policy tokens), :math:`\rho_a = \pi_a/\mu_a` of an action", "off_policy",
           "``token_ratio``, ``sequence_ratio``", "the off-policy literature's ρ (Retrace, V-trace)", _KL,
           forms=(r"\rho_t", r"\rho_a")),
    Symbol(r"\nu", r"a squared score norm: :math:`\nu_a = \lVert s(a)\rVert^2` of an action (or of a first turn's score); "
           r"verl's :math:`\nu_{it}` sums them over the steps up to :math:`t`", "baselines", "``nu``; ``optimal_token_baseline_advantages``",
           "ν, a Greek n, for a norm", _SCORE, forms=(r"\nu_a",)),
    Symbol("v", r"the sampler-correction weight of a token, :math:`\hat g = \sum_t v_t A s_t`", "off_policy",
           "``CORRECTION_WEIGHTS``, ``weights``", "v for the weight of a correction, as :math:`w` is the loss's", _KL,
           forms=("v_t",)),
    Symbol(r"\beta", "the coefficient of a KL penalty", "score_function", "``beta``, ``kl_coef``", "the RLHF papers' β", _KL),
    Symbol(r"r_{\mathrm{ref}}", r"the reference ratio :math:`\pi_{\mathrm{ref}}/\pi_\theta` of the KL estimators",
           "trust_region", "``ref_log_prob - log_prob`` (its log)", "Schulman's :math:`r = p/q`, named so that :math:`r` "
           "stays the importance ratio", _KL),
    Symbol("k_1", r"the KL estimators :math:`k_1 = -\log r_{\mathrm{ref}}`, :math:`k_2 = \frac12(\log r_{\mathrm{ref}})^2`, "
           r":math:`k_3 = r_{\mathrm{ref}} - 1 - \log r_{\mathrm{ref}}`", "trust_region", "``kl_k1``, ``kl_k2``, ``kl_k3``",
           "Schulman's names", _KL, forms=("k_2", "k_3"), labels=("1", "2", "3"), bare=False),
]

GLOBAL += [
    Symbol("i", "an answer of a group, or a sequence (row) of a batch", "conventions", "row ``i`` of ``[B, T]``",
           "the usual first index", _GROUP),
    Symbol("N", "the number of responses of the toy LM (its arrays are ``[N, L]``)", "conventions", "``TinyLM.N``",
           "N for the number of items", _COUNT),
    Symbol("L", "the toy LM's longest response (its arrays are ``[N, L]``); the number of policy tokens of a chain",
           "conventions", "``TinyLM.L``", "L for length", _COUNT),
    Symbol(r"\mathcal{V}", r"the toy LM's vocabulary; :math:`|\mathcal{V}|` its size", "gradient_weights",
           "``TinyLM(V=...)``, ``TinyLM.V``", "calligraphic, because :math:`V` is a value", _COUNT),
    Symbol("O", "the order of growth, :math:`O(T)`", "returns", "", "Landau's symbol", _COUNT),
]


def _local(page: str, latex: str, meaning: str, code: str = "", why: str = "", **kw) -> Symbol:
    return Symbol(latex, meaning, page, code, why, local=True, **kw)


LOCAL = [
    # score_function
    _local("score_function", "j", r"a coordinate of :math:`\theta` (:math:`s_j` the score's coordinate :math:`j`)", "``j``", "j for a coordinate index, as in the softmax's Jacobian"),
    _local("score_function", "n", r"the slack in :math:`K = j + n`, :math:`n \ge 0`, which says that :math:`j` is one of the actions",
           "``n``", "n for a natural-number slack, as SymPy's K = j + n reads"),
    _local("score_function", "k", "a position of the input ids, prompt included (the logits at :math:`k` score the token at :math:`k + 1`)", "", "k for a position in the model's input, kept apart from the response's t"),
    _local("score_function", "Y", r"a continuous random variable, :math:`y` its value, :math:`p_\theta(y)` its density",
           forms=("y", r"p_\theta(y)"), why="a capital for a random variable, its lower case for a value (R and r are taken)"),
    _local("score_function", "y", "the value of :math:`Y`", "", "the lower case of Y"),
    _local("score_function", "p", r"the density :math:`p_\theta(y)` of :math:`Y`; :math:`p_\theta(\tau)` of a trajectory", "", "p for a density, as in the score-function literature's p_theta"),
    _local("score_function", "f", r"the integrand of an expectation, :math:`f_\theta(o)` when it depends on :math:`\theta`",
           forms=("f'",), why="f for the function inside the expectation, as in the REINFORCE literature"),
    _local("score_function", "f'", "the derivative of :math:`f`", "", "Lagrange's prime for a derivative"),
    _local("score_function", "g", r"a dominating function, :math:`|\nabla_\theta\, p_\theta(y) f(y)| \le g(y)`", "", "g for the bound of dominated convergence, as analysis texts write it"),
    _local("score_function", "z", r"a standard normal draw, :math:`z \sim \mathcal N(0, 1)`", "", "z for a standard normal draw, as in the reparameterisation literature"),
    _local("score_function", r"\tau", "a trajectory of the two-step MDP, :math:`(a, x', a')`", "", "tau for a trajectory, as in the policy-gradient literature"),
    _local("score_function", "P", r"the transition kernel of the two-step MDP, :math:`P(x' \mid a)`", "``TwoStepMDP``", "P for the transition kernel, as in MDP texts"),
    _local("score_function", r"\bar\theta", r"a frozen copy of :math:`\theta`, set equal to :math:`\theta` after differentiating", "", "a bar over theta for a copy that is held fixed"),
    _local("score_function", r"\Phi", r"the reward mass through a state, :math:`\Phi(a, x') = \sum_{a'} p(a, x', a') R(a, x', a')`", "", "a capital Greek letter for an aggregate that no chapter uses otherwise"),
    _local("score_function", r"\Omega", "the fixed logits of the two-step MDP's transition kernel", "``TwoStepMDP``", "a capital Greek letter, as theta is the policy's logits"),
    _local("score_function", r"\Upsilon", r"the coupling of the kernel to the second-step logits (:math:`\Upsilon = 0`: a fixed kernel)",
           "``coupling``", "a capital Greek letter beside Omega for the kernel's second part"),
    _local("score_function", "Z", r"the softmax normaliser :math:`\sum_b e^{\theta_b}`", "", "Z for a normaliser (the partition function)"),
    _local("score_function", "x", r"the argument of the stop-gradient :math:`\operatorname{sg}(x)`", "", "x for a generic argument"),
    # baselines
    _local("baselines", "j", r"a coordinate of :math:`\theta` (the score's coordinate :math:`s_j`)", "``j``", "j for a coordinate index, as in the score-function chapter"),
    _local("baselines", "n", r"the slack in :math:`K = j + n`, :math:`n \ge 0`, which says that :math:`j` is one of the actions", "", "n for a natural-number slack, as in the score-function chapter"),
    _local("baselines", "x", "a prompt", "", "x for the input"),
    _local("baselines", "p", r"the probabilities of the outcomes (of the arms of a bandit)", "``probs``", "p for a probability"),
    _local("baselines", r"\alpha", r"the coefficients of :math:`\operatorname{Var}(b) = \alpha_0 - 2b\alpha_1 + b^2\alpha_2 - \lVert\nabla J\rVert^2`, "
           r":math:`\alpha_k = \mathbb{E}[R^{2-k}\lVert s\rVert^2]`", "``VarianceTerms.A_0``, ``A_1``, ``A_2``",
           "Greek, because :math:`A` is the advantage"),
    _local("baselines", "k", r"the index :math:`k = 0, 1, 2` of :math:`\alpha_k`", "", "k for the index of a coefficient"),
    _local("baselines", "z", r"the logits :math:`z_{a',a}(\theta)` of the second-step policy", "``prefix_baseline``", "z for logits, as in the deep-learning literature"),
    # group_baselines
    _local("group_baselines", "j", "another answer of the group (a summation index over the answers)", "``j``", subscripts=True, why="j for another answer beside answer i"),
    _local("group_baselines", "n'", "a count pattern of the whole group", "", "a prime on n, the count of the other answers"),
    _local("group_baselines", "k", r"a number of successes among the other answers (a value of :math:`S_{-i}`)", "``k``", "k for a number of successes, as in the binomial law"),
    _local("group_baselines", "n", r"a count: the number of successes in the whole group, or how many of the other answers take a reward value (the count pattern :math:`n = (n_1, \dots, n_m)`)", "", "n for a count, as in the binomial and multinomial laws"),
    _local("group_baselines", "y", "an answer's own reward, :math:`y \\in \\{0, 1\\}`", "", "y for a value of the reward R (r is the ratio)"),
    _local("group_baselines", "p", r"a binary reward's success probability :math:`\Pr[R = 1]`", "``p``", "p for a success probability, as in the Bernoulli law"),
    _local("group_baselines", "x", "a prompt", "", "x for the input (the prompt)"),
    _local("group_baselines", r"\Delta", r"the GRPO gap :math:`\Delta_k = A(1, k) - A(0, k)` between a success and a failure that see "
           r"the same :math:`k` other successes", "``grpo_weight_coefficients``", "Δ for a difference"),
    # returns
    _local("returns", "k", r"a coordinate of a block of logits (:math:`s_{1,k}`); a number of steps before the end", "", "k for a second index beside t"),
    _local("returns", "n", r"the slack in :math:`T - 1 = t + n`, :math:`n \ge 0`, which says that step :math:`t` is in the episode", "", "n for a natural-number slack, as in the score-function chapter"),
    _local("returns", "p", r"the probability that the first decision of the credit example takes action 2", "", "p for a probability"),
    _local("returns", "q", r"the probability that the second decision of the credit example takes action 2", "", "q for a second probability, after p"),
    _local("returns", "g", r"the gradient block of one decision, :math:`(g_0, g_1)`, in the discounting example", "", "g for a gradient block"),
    # conventions
    _local("conventions", "x", r"the argument of the stop-gradient :math:`\operatorname{sg}(x)`", "", "x for a generic argument"),
    # gradient_weights
    _local("gradient_weights", "x", r"the argument of the stop-gradient :math:`\operatorname{sg}(x)`", "", "x for a generic argument"),
    _local("gradient_weights", r"\eta", r"a positive parameter of an open region of ratios, :math:`r = l + (h - l)\,\eta/(1 + \eta)`",
           "", "a Greek letter free on this page"),
    # trust_region
    _local("trust_region", "x", r"a real number of the scalar lemma, instantiated as :math:`x = \pi_a`", "", "x and y for the lemma's two real numbers"),
    _local("trust_region", "y", r"a real number of the scalar lemma, instantiated as :math:`y = \mu_a`", "", "x and y for the lemma's two real numbers"),
    _local("trust_region", "f", r"the convex function :math:`f(r_{\mathrm{ref}}) = r_{\mathrm{ref}} - 1 - \log r_{\mathrm{ref}}` behind :math:`k_3 \ge 0`",
           forms=("f'", "f''"), why="f for the convex function of an f-divergence"),
    _local("trust_region", "f'", r"the derivatives of :math:`f`", forms=("f''",), why="Lagrange's primes for derivatives"),
    _local("trust_region", "f''", r"the second derivative of :math:`f`", "", "Lagrange's primes for derivatives"),
    _local("trust_region", "g", r"the gap :math:`g(t) = \mathbb{E}_\pi[k_2] - \mathrm{KL}(\pi\,\|\,\pi_{\mathrm{ref}})` along a path of policies", "", "g for a function of the path parameter, after f"),
    _local("trust_region", "j", r"a coordinate of :math:`\theta`", "", "j for a coordinate index, as in the score-function chapter"),
    _local("trust_region", "n", r"the slack in :math:`K = j + n`, :math:`n \ge 0`", "", "n for a natural-number slack, as in the score-function chapter"),
    _local("trust_region", "p", r"the probability of the first of two actions, :math:`\pi = (p, 1-p)`", "", "p for a probability"),
    # off_policy
    _local("off_policy", "f", "the feedback (tool) token the environment writes after turn 0, at position 1; :math:`s_f` its score, "
           r":math:`\pi_f` the model's distribution at its slot", "``feedback_term``", "f for feedback"),
    _local("off_policy", "q", r"the success probability :math:`q_{aa'}` of the agent's episode :math:`(a, a')`", "", "q for a success probability (p is a density on other pages)"),
    _local("off_policy", r"\zeta", "the sampler's mismatch: how far its weights lag, :math:`\\theta_\\mu = \\theta + \\zeta\\,\\xi`", "``mismatch``", "a Greek letter the chapter does not otherwise use, for the size of the lag"),
    _local("off_policy", r"\xi", "the fixed direction of the sampler's lag", "", "xi for a fixed direction in parameter space, beside zeta"),
    _local("off_policy", "g", r"any quantity of an episode (:math:`g = A(s_0 + s_2)` gives :math:`\nabla J`)", "", "g for a generic function of an episode"),
    _local("off_policy", "j", r"a coordinate of :math:`\theta`", "", "j for a coordinate index, as in the score-function chapter"),
    _local("off_policy", "n", r"the slack in :math:`K = j + n`, :math:`n \ge 0`", "", "n for a natural-number slack, as in the score-function chapter"),
    _local("off_policy", "k", "a coordinate of a score (an action label)", "", "k for a coordinate index beside j"),
    _local("off_policy", "x", r"a real number of the positive-part lemma (:math:`x = \pi_a`)", "", "x and y for the lemma's two real numbers"),
    _local("off_policy", "y", r"a real number of the positive-part lemma (:math:`y = \mu_a`)", "", "x and y for the lemma's two real numbers"),
    _local("off_policy", r"\Theta", r"the per-step logits of the :math:`L`-step chain, :math:`\Theta_{t, o_{t-1}}`", "``chain_score_moments``", "the capital of theta for the chain's logit table"),
    # gradient_weights (more)
    _local("gradient_weights", "p", "the probability of the rare fork token", "", "p for a probability"),
    _local("gradient_weights", "k", "the number of points at which a reasoning chain re-opens with the fork token", "", "k for a count"),
    # returns (more)
    _local("returns", "d", r"the flag ``terminated`` of step :math:`t`, :math:`d_t` (1: no continuation)", "``terminated``",
           "d for done, as in gym"),
    _local("returns", "H", r"the Jacobian of an update field :math:`\theta \mapsto \mathbb{E}_\theta[\sum_t w_t s_t]` (symmetric for a gradient field)", "", "H for a Hessian-like Jacobian (a gradient field's Jacobian is the Hessian)"),
    # losses
    _local("losses", "x", r"a per-token loss value :math:`x_{it}`, the input of an aggregation", "``per_token``", "x for the input of a function"),
    _local("losses", "n", r"a length: :math:`n_i = \sum_t m_{it}`, the number of tokens of answer :math:`i` (:math:`n^{\mathrm{in}}_i` of its "
           r"prompt, :math:`n^{\mathrm{turns}}_i` in turns)", "``lengths``", "n for a length, a number of tokens"),
    _local("losses", "j", "another answer of the batch (a summation index)", "", "j for another answer beside answer i"),
    _local("losses", "k", r"VESPO's Gamma shape, :math:`\phi(W) = W^k e^{\zeta(1 - W)}`", "``vespo_k``", "VESPO's paper's shape parameter k"),
    _local("losses", r"\zeta", r"VESPO's Gamma rate", "``vespo_lambda``", r"VESPO's λ, renamed: :math:`\lambda` is GAE's"),
    _local("losses", r"\phi", r"VESPO's Gamma weight of a row's product ratio", "", "phi for a weight function, as VESPO writes it"),
    _local("losses", "W", r"a row's product of ratios, :math:`W_i = \prod_t r_{it}` (VESPO)", "", "W for a product weight, as VESPO writes it"),
    _local("losses", r"\psi", r"token-mean's expected normaliser for an answer of length :math:`n`, :math:`\mathbb E[1/(n + \sum_{j \ne i}|o_j|)]`",
           "``derivations.losses.length_bias``", "a Greek letter the chapter does not otherwise use, beside phi"),
    _local("losses", r"\tau", r"SAPO's temperature: :math:`\tau_+` where :math:`A > 0`, :math:`\tau_-` elsewhere", "``sapo_tau``", "SAPO's paper's temperature tau"),
    _local("losses", r"p_{\mathrm{KL}}", r"KL-Cov's penalty derivative :math:`\beta\,\mathrm{sgn}(\ell - \ell_{\mathrm{old}})`, a term no advantage multiplies",
           "``penalty_gradient``", "p for penalty, subscripted KL"),
    _local("losses", "p", r"a binary reward's success probability :math:`\Pr[R = 1]`", "``p``", "p for a success probability, as in the Bernoulli law"),
    _local("losses", r"\bar A", r"a mean advantage: of row :math:`i`'s tokens (:math:`\bar A_i`, GMPO) or of the batch (:math:`\bar A`, Clip-Cov)", "", "a bar for a mean"),
    _local("losses", r"\bar\ell", r"the batch mean of :math:`\ell`", "", "a bar for a mean"),
    _local("losses", r"\bar r", r"GMPO's clipped geometric-mean ratio of a row, :math:`\bar r_i = \exp(\frac1{n_i}\sum_t g(\log r_{it}))`",
           "``derivations.losses.gmpo_derivation``", "a bar for a (geometric) mean"),
    _local("losses", "g", r"GMPO's clip of a log-ratio to :math:`[-\tilde\varepsilon_l, \tilde\varepsilon_h]` on the side the advantage pushes",
           forms=("g'",), why="g for a function applied to log r, as GMPO's clip is applied"),
    _local("losses", "g'", r"the derivative of GMPO's :math:`g`: 1 on the live side, 0 beyond the clip", "", "Lagrange's prime for a derivative"),
    _local("losses", r"\tilde\varepsilon_l", r"GMPO's clip range on :math:`\log r`, :math:`(\tilde\varepsilon_l, \tilde\varepsilon_h)`", "``gmpo_clip``",
           r"GMPO's ε, with a tilde because it bounds :math:`\log r`", labels=("l", "h"), bare=False,
           forms=(r"\tilde\varepsilon_h",)),
    _local("losses", r"\eta", r"a positive parameter of an open region of :math:`\log r`", "", "a small Greek letter for a positive offset"),
    _local("losses", r"\alpha", r"GPG's scale of the centred rewards", "``gpg_advantages``", "GPG's paper's scale alpha"),
    _local("losses", "z", "the logits of a softmax step", "", "z for logits, as in the deep-learning literature"),
    _local("losses", "H", r"a token's entropy, :math:`H_{it}`", "``token_entropy``", "H for entropy, as in information theory"),
    _local("losses", "q", r"SAPO's gate, :math:`q = \operatorname{sigmoid}(\tau(r - 1))`", "", "q for SAPO's gate, beside p"),
    _local("losses", "H^*", "the entropy quantile above which TRL's high-entropy mask keeps a token", "``top_quantile``", "a star for a threshold of H"),
    # variants
    _local("variants", "y", r"a value of the reward, :math:`y_1, \dots, y_m`", "", "y for a value of the reward R (r is the ratio)"),
    _local("variants", "q", r"the probabilities of the reward's values, :math:`q_k = \Pr[R = y_k]`", "", "q for the probabilities of a law (p is a binary law's success probability)"),
    _local("variants", "k", "the index of a reward value; a number of successes among the other answers", "", "k for the index of a value, or a number of successes as in the binomial law"),
    _local("variants", "n", r"a count pattern: :math:`n_k` of the other answers take the value :math:`y_k`; a number of successes", "", "n for a count, as in the binomial and multinomial laws"),
    _local("variants", "m", "the number of values of a finite reward law", "", "m for a number of values"),
    _local("variants", "d", r"the degree of a power of the reward, :math:`\alpha_d y^d`, :math:`\mathbb{E}[R^d s]`", "", "d for a degree"),
    _local("variants", "p", r"a binary reward's success probability :math:`\Pr[R = 1]`", "``p``", "p for a success probability, as in the Bernoulli law"),
    _local("variants", r"\bar A", r"the advantage averaged over the other answers, :math:`\bar A(y) = \mathbb{E}[A_i \mid R_i = y]`", "", "a bar for a mean"),
    _local("variants", r"\alpha", r"the coefficients of :math:`\bar A(y) = \sum_{d<m} \alpha_d y^d`; :math:`c = \alpha_1`", "", "Greek for coefficients, because A is the advantage"),
    _local("variants", r"\eta", r"the Bernstein coefficients :math:`\eta_d(n)` of :math:`\alpha_d`", "", "Greek beside alpha; beta is the KL coefficient"),
    _local("variants", "j", "another answer of the group (a summation index)", "", "j for another answer beside answer i"),
    _local("variants", "x", r"the argument of the stop-gradient :math:`\operatorname{sg}(x)`", "", "x for a generic argument"),
    # off_policy: the trainers' rejection rules (derivations.corrections, numeric.off_policy.rollout, .masks, .corrections)
    _local("off_policy", "z", r"a token's log sampler ratio, :math:`z_t = \log\rho_t = \log\pi - \log\mu`", "``log_ratio``",
           "z for a log-scale quantity; x and y are the positive-part lemma's numbers here"),
    _local("off_policy", "d", r"the largest value of a divergence statistic a rule keeps (a KL estimate, a mean log-ratio, "
           r"M2PO's :math:`z_t^2`, a change of probability); :math:`d_h` and :math:`d_l` its two sides where a mask reads the sign of "
           r":math:`A`", "``delta``, ``threshold``, ``high``, ``low``",
           r"d for a divergence (l and h are the ends of a band of ratios, :math:`\delta` is the TD error)", labels=("l", "h")),
    _local("off_policy", "d^*", r"M2PO's cut in the limit of a large micro-batch", "``M2POLimit.cut``", "a star for a limit"),
    _local("off_policy", r"\tau", r"M2PO's threshold: the mean of the kept :math:`z_t^2` is below it", "``m2_threshold``, ``threshold``",
           "AReaL's and the M2PO paper's tau"),
    _local("off_policy", r"\alpha", r"AReaL's log-linear weight: :math:`\log\pi_{\mathrm{prox}} = \log\mu + \alpha(\log\pi_\theta - \log\mu)`",
           "", "AReaL's alpha"),
    _local("off_policy", r"\pi_{\mathrm{prox}}", "AReaL's proximal policy, a step behind the current one", "``prox_logp``",
           "AReaL's name for it"),
    _local("off_policy", r"\tilde\rho", r"the behaviour weight of AReaL's decoupled loss, :math:`\tilde\rho = \pi_{\mathrm{prox}}/\mu`",
           "", "a tilde on the sampler ratio it is a power of"),
    # losses: the trainers' estimators and shaping (numeric.losses.group_advantages, numeric.losses.shaping, penalties)
    _local("losses", r"\Delta", r"a token's log-ratio to the reference, :math:`\Delta = \ell - \ell_{\mathrm{ref}} = -\log r_{\mathrm{ref}}`",
           "``log_prob - ref_log_prob``", "Delta for a difference of log-probabilities"),
    _local("losses", "R'", "a shaped reward: the reward less a length penalty, or scaled where the answer was cut off",
           "``overlong_penalized_rewards``, ``stop_properly_rewards``, ``length_penalized_advantages``", "a prime on R for the reward changed"),
    _local("losses", r"\overline{R'}", r"the group mean of :math:`R'`", "", "a bar for a mean"),
    _local("losses", "J'", r"the objective of the shaped reward, :math:`J' = \mathbb{E}[R']`", "", "a prime on J, as on R"),
    _local("losses", r"\xi", r"the weights of a weighted sum of rewards or penalties: GDPO's vector :math:`\xi` of the rewards' weights, "
           r"prime-rl's :math:`\xi_{\mathrm{out}}, \xi_{\mathrm{in}}, \xi_{\mathrm{turns}}` of its length terms", "``weights``",
           "a Greek letter free on this page (w is the gradient weight)", subscripts=True),
    _local("losses", r"\mathbf z", r"GDPO: the vector :math:`\mathbf z_i` of answer :math:`i`'s per-reward group z-scores", "",
           "z for a z-score, bold for a vector (z alone is a logit on this page)"),
    _local("losses", r"\tilde R", r"GDPO's weighted sum of an answer's z-scores, :math:`\tilde R_i = \xi^\top \mathbf z_i`", "",
           "a tilde on R for a transformed reward"),
    _local("losses", r"\pi_{\mathrm{teacher}}", "the teacher policy of on-policy distillation and RLSD", "``teacher_log_prob`` (its log)",
           r"named, as :math:`\pi_{\mathrm{old}}` and :math:`\pi_{\mathrm{ref}}` are"),
    # variants: the loss checker's precision probe (numeric.variants.precision)
    _local("variants", r"u_{\text{eff}}", "the relative rounding measured in a trainer's loss and its gradient", "``Precision.measured``",
           "u, numerical analysis's unit roundoff, made effective: the one the loss shows"),
    _local("variants", r"\epsilon_{\text{type}}", "the machine epsilon of a floating type", "``torch.finfo(dtype).eps``",
           "the numerical-analysis epsilon, named by its type (the bare epsilon is the clip parameter)"),
    _local("variants", "z", r"the step of the precision probe: the log-probabilities are moved by :math:`2^{-20} z`, :math:`z = 0, \dots, 8`",
           "", "z for a coordinate along a probe's line"),
    _local("variants", "g", r"the gradient of a trainer's loss in the log-probabilities, :math:`g(z)` along the precision probe", "",
           r"g for a gradient (:math:`\hat g` is an estimator of :math:`\nabla J`)"),
    _local("variants", r"\tilde{\mathcal L}", r"the least-squares parabola through the loss values :math:`\mathcal L(z)` of the precision probe", "",
           "a tilde for a fit"),
    _local("variants", r"\tilde g", r"the least-squares parabola through the gradients :math:`g(z)` of the precision probe", "",
           "a tilde for a fit"),
    _local("variants", r"\psi", r"a relabelling (permutation) of a group's answers, acting on the vector :math:`R` of their rewards", "",
           "a Greek letter free on this page (sigma is the std, pi the policy, tau SAPO's temperature)"),
    # gradient_weights: the docstrings of the token forms read from chapter 8
    _local("gradient_weights", r"\tau", r"SAPO's temperature: :math:`\tau_+` where :math:`A > 0`, :math:`\tau_-` elsewhere", "``sapo_tau``",
           "SAPO's paper's temperature tau"),
    # execution (and the modules of numeric.variants that conf.py's notation_module_pages sends to it)
    _local("execution", "W", "the data-parallel world size: the number of ranks the global batch is split over",
           "``dp_size``, ``world_sizes``", "W for torch.distributed's world size"),
    _local("execution", "p", r"a data-parallel rank, :math:`0 \le p < W`: it holds the rows :math:`[pB/W, (p+1)B/W)`",
           "``Share.rank``", "p for a process (torch.distributed's ranks are processes); w is the token's gradient weight"),
    _local("execution", "U", "the micro-batches of a rank's share, the gradient-accumulation steps of one optimizer step",
           "``micro_batches``", "U for the updates accumulated into one step (M, the pipeline papers' letter, is MiniMax-M1's mask)"),
    _local("execution", "q", r"a micro-batch of a rank's share, :math:`0 \le q < U`", "``Share.micro_batch``", "q, the letter after the rank's p"),
    _local("execution", "Z", r"the batch's valid tokens :math:`Z = \sum_{it} m_{it}`, a token-mean's normaliser; :math:`Z_{p,q}` those of "
           r"micro-batch :math:`q` of rank :math:`p`", "``Share.tokens``, ``Share.micro_tokens``",
           "Z for the normaliser a mean divides by (N is the toy LM's number of responses)"),
    _local("execution", "B'", "the rows of the batch that hold a token", "``Share.sequences``", "a prime on B, the number of rows"),
    _local("execution", r"\tau", "the largest gradient norm that global-norm gradient clipping lets through", "",
           "tau for a threshold"),
    _local("execution", "g", r"a gradient: of a step before clipping, of the loss in a token's log-probability (:math:`g_{ot}`), "
           "the expected KL gradient a loss gives", "", r"g for a gradient (:math:`\hat g` is an estimator of :math:`\nabla J`)"),
    _local("execution", "k", r"a per-token KL form as a function of :math:`\Delta`, :math:`k(\Delta)`; :math:`k_*` any estimator whose "
           "value a straight-through form keeps", "``kl_penalty``", r"Schulman's k, as in :math:`k_1, k_2, k_3`"),
    _local("execution", r"\Delta", r"a token's log-ratio to the reference, :math:`\Delta = \ell - \ell_{\mathrm{ref}} = -\log r_{\mathrm{ref}}`",
           "``log_prob - ref_log_prob``", "Delta for a difference of log-probabilities"),
    _local("execution", "j", r"a coordinate of :math:`\theta` (:math:`\partial_j = \partial/\partial\theta_j`)", "",
           "j for a coordinate index, as in the score-function chapter"),
    _local("execution", "n", r"the slack in :math:`K = j + n`, :math:`n \ge 0`, which says that :math:`j` is one of the actions", "",
           "n for a natural-number slack, as in the score-function chapter"),
    _local("execution", "z", r"a real value with :math:`z e^{z} = -e^{-11}`: where verl's clamped :math:`k_3` reaches 10 is :math:`\Delta = 11 + z`",
           "", "z for the unknown of Lambert's equation (w is the gradient weight)"),
    # the trust-region docstrings of the trainers' KL forms (derivations.trust_region)
    _local("trust_region", "k", r"a per-token KL form as a function of :math:`\Delta`, :math:`k(\Delta)`; :math:`k_*` any estimator whose "
           "value a straight-through form keeps", "``k_star``", r"Schulman's k, as in :math:`k_1, k_2, k_3`"),
    _local("trust_region", r"\Delta", r"a token's log-ratio to the reference, :math:`\Delta = \ell - \ell_{\mathrm{ref}} = -\log r_{\mathrm{ref}}`",
           "``delta``", "Delta for a difference of log-probabilities"),
    _local("trust_region", "W", r"Lambert's function, the inverse of :math:`z \mapsto z e^{z}`: :math:`W_0` and :math:`W_{-1}` its two real branches below 0",
           "", "Lambert's W, its standard name"),
    _local("trust_region", "z", r"a real value with :math:`z e^{z} = -e^{-11}`: where verl's clamped :math:`k_3` reaches 10 is :math:`\Delta = 11 + z`",
           "", "z for the unknown of Lambert's equation (w is the gradient weight)"),
    # the 0/1 mask: local to each page that uses it (the variants chapter's m is the number of reward values)
    _local("conventions", "m", r"the 0/1 mask: :math:`m_{it}` of position :math:`t` of sequence :math:`i`", "``mask``", "m for mask"),
    _local("score_function", "m", r"the 0/1 mask: :math:`m_{it}` of position :math:`t` of sequence :math:`i`", "``mask``", "m for mask"),
    _local("losses", "m", r"the 0/1 mask: :math:`m_{it}` of position :math:`t` of sequence :math:`i`", "``mask``", "m for mask"),
    _local("off_policy", "m", r"the 0/1 mask: :math:`m_{it}` of position :math:`t` of sequence :math:`i`", "``mask``", "m for mask"),
    _local("api", "m", r"the 0/1 mask: :math:`m_{it}` of position :math:`t` of sequence :math:`i`", "``mask``", "m for mask"),
    _local("execution", "m", r"the 0/1 mask: :math:`m_{it}` of position :math:`t` of sequence :math:`i`", "``mask``", "m for mask"),
    _local("returns", "m", r"the 0/1 mask: :math:`m_{it}` of position :math:`t` of sequence :math:`i`", "``mask``", "m for mask"),
    _local("baselines", "m", r"the 0/1 mask: :math:`m_{it}` of position :math:`t` of sequence :math:`i`", "``mask``", "m for mask"),
    _local("gradient_weights", "m", r"the 0/1 mask: :math:`m_{it}` of position :math:`t` of sequence :math:`i`", "``mask``", "m for mask"),
    # the docstrings on the API page, by topic
    _local("gradient_weights", "d", r"a positive parameter of a region beyond a clip edge, :math:`r = (1+\varepsilon_h)(1+d)`", "", "d for a distance beyond the edge"),
    _local("group_baselines", "m", "the number of distinct reward values", "", "m for a number of values"),
    _local("group_baselines", "q", r"the probabilities of the reward values, :math:`q_k = \Pr[R = y_k]`", "", "q for the probabilities of a law (p is a binary law's success probability)"),
    _local("group_baselines", "X", r"a per-answer random quantity of the group algebra (:math:`X_j` of answer :math:`j`)", "", "a capital for a random quantity"),
    _local("group_baselines", "f", r"a function of an answer's index, summed over the group", "", "f for a function"),
    _local("group_baselines", r"\phi", r"a function of the other answers (of :math:`S_{-i}`), which factorises from answer :math:`i`", "", "phi and psi for the two factors of a product"),
    _local("group_baselines", r"\psi", r"a function of answer :math:`i`'s own quantities", "", "phi and psi for the two factors of a product"),
    _local("group_baselines", r"\bar A", r"the advantage averaged over the other answers, :math:`\bar A(y) = \mathbb{E}[A_1 \mid R_1 = y]`", "", "a bar for a mean"),
    _local("losses", "B'", r"the number of rows that hold a token (the seq-mean modes with ``empty_rows=\"exclude\"``)", "", "a prime on B, the number of rows"),
    _local("losses", "f", r"a row's loss as a function of its sequence ratio, :math:`f(\tilde r)`", forms=("f'",), why="f for a function"),
    _local("losses", "f'", r"the derivative of :math:`f`", "", "Lagrange's prime for a derivative"),
    _local("losses", "F", r"GPG's normaliser of the advantages", "", "F for a normaliser, as GPG's paper writes it"),
    _local("losses", r"\bar x", "the mean of a per-token quantity over a row's response tokens", "", "a bar for a mean"),
    _local("losses", "d", r"the degree of a reward power, :math:`\mathbb{E}[R^d s]`", "", "d for a degree"),
    # losses: issue 29's methods and readings
    _local("losses", r"\delta_{\mathrm{low}}", r"DPPO's trust region: a token of :math:`A \le 0` is kept while :math:`\pi - \pi_{\mathrm{old}} \ge -\delta_{\mathrm{low}}` (binary TV) or its binary KL is at most :math:`\delta_{\mathrm{low}}`",
           "``tv_delta[0]`` (SkyRL ``delta_low``, verl ``clip_ratio_low``)", "the DPPO paper's delta, with a word: the global delta is GAE's TD error"),
    _local("losses", r"\delta_{\mathrm{high}}", r"DPPO's trust region for :math:`A > 0`: :math:`\pi - \pi_{\mathrm{old}} \le \delta_{\mathrm{high}}` (binary TV), or the binary KL bound",
           "``tv_delta[1]``", "as delta_low"),
    _local("losses", r"C_{\mathrm{IS}}", r"verl DPPO's truncation of the stopped ratio, :math:`\min(r, C_{\mathrm{IS}})` (its ``clip_ratio_c``)", "``is_cap``",
           "C for a cap, IS for the importance weight it truncates"),
    _local("losses", r"\tau_{\mathrm{KL}}", r"prime-rl's coefficient of the advantage-free :math:`\tau_{\mathrm{KL}}(\log r)^2`", "``kl_tau``",
           "prime-rl's kl_tau; the word keeps it apart from SAPO's tau"),
    _local("losses", r"\delta_{\mathrm{band}}", r"prime-rl's ipo band: a token is kept while :math:`|\pi - \pi_{\mathrm{old}}| \le \delta_{\mathrm{band}}`, for both signs of :math:`A`",
           "``band_delta`` (prime-rl ``ipo_threshold``)", "a delta on the probability change, as DPPO's"),
    _local("losses", r"\beta_{\mathrm{DRO}}", r"DRO's coefficient: the loss :math:`-(A\ell - \tfrac{\beta_{\mathrm{DRO}}}{2}(\log r)^2)`", "``dro_beta``",
           "verl's dro_beta"),
    _local("losses", r"\delta_{\mathrm{OPSM}}", r"OPSM's threshold: a row of negative advantage whose mean log-ratio is below :math:`-\delta_{\mathrm{OPSM}}` is dropped",
           "``opsm_delta``", "the DeepSeek-V3.2 report's delta, with a word"),
    _local("losses", r"\tilde g", r"seq-mask-TIS's gate: a row's geometric-mean ratio to the sampler, :math:`\exp(\frac1n\sum_t(\ell_t - \ell_{0,t}))`",
           "", "g for a gate, the tilde of a row's geometric mean (as the tilde of r)"),
    _local("losses", r"\delta_{\mathrm{TRL}}", r"TRL's ``delta``: the two-sided clip's cap on the unclipped term's ratio (INTELLECT-2's)", "``dual_clip``",
           "TRL's delta, with a word: the global delta is GAE's TD error"),
    _local("losses", "P", "the number of prompts of a batch (prompt-mean)", "``groups``", "P for prompts"),
    _local("losses", r"k_{\mathrm{TV}}", r"DPPO's binary-TV keep mask of a token (0 or 1, stopped)", "", "k for keep"),
    _local("losses", r"k_{\mathrm{KL}}", r"DPPO's binary-KL keep mask of a token (0 or 1, stopped)", "", "k for keep"),
    _local("off_policy", r"\bar A", r"an episode's mean advantage over the verifier's draws", "", "a bar for a mean"),
    _local("off_policy", r"\bar v", r"the batch mean of the correction weights", "", "a bar for a mean"),
    _local("off_policy", r"\eta", r"a positive parameter of a region of ratios, :math:`h = l + \eta`", "", "a small Greek letter for a positive offset"),
    _local("variants", r"\tau", r"SAPO's temperatures :math:`\tau_+` (for :math:`A > 0`) and :math:`\tau_-`, read off a weight", "", "SAPO's paper's temperature tau"),
    _local("api", "P", r"the number of parameters, :math:`\theta \in \mathbb{R}^P`", "", "P for the parameter count"),
    _local("api", "X", "a random quantity (a side of a claim about expectations)", "", "a capital for a random quantity"),
    _local("api", "Y", "a second random quantity", "", "the letter after X"),
    _local("api", "Z", r"the softmax normaliser :math:`\sum_b e^{\theta_b}`", "", "Z for a normaliser (the partition function)"),
    _local("api", "d", r"a positive parameter of a region of ratios, :math:`r = (1+\varepsilon)(1+d)`", "", "d for a distance beyond the edge"),
    _local("api", "f", "a function (of a count, of an answer, of the notation a definition names)", "", "f for a function"),
    _local("api", "g", "a second function", "", "g for a second function, after f"),
    _local("api", "j", "an index (of an indexed entry, or of a coordinate)", "", "j for an index"),
    _local("api", "k", "a count, or a summation index over counts", "", "k for a count, as in the binomial law"),
    _local("api", "n", "a number of steps (of a derivation), or the slack in :math:`K = j + n`", "", "n for a count or a natural-number slack"),
    _local("api", "p", "a probability", "", "p for a probability"),
    _local("api", "q", r"the probabilities of a finite law, :math:`q_k`", "", "q for the probabilities of a law"),
    _local("api", "x", "a real number, or the argument of a stop-gradient", "", "x for a generic argument"),
    _local("api", "y", "a second real number", "", "the letter after x"),
    _local("api", r"\tilde\varepsilon_l", r"GMPO's clip range on :math:`\log r`", "``gmpo_clip``", labels=("l", "h"), bare=False,
           forms=(r"\tilde\varepsilon_h",), why="GMPO's clip range, written with a tilde because it bounds log r, not r"),
]

SYMBOLS = tuple(GLOBAL + LOCAL)
