"""The run configuration's schema: frozen dataclasses, one docstring per field, which OmegaConf uses as the
structured schema that space files and the command line are checked against (:mod:`sweep.config.compose`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class Knobs:
    """What the planner may choose; each value is a list of choices (one element: fixed)."""

    num_envs: list[int] = field(default_factory=lambda: [4096])
    """Parallel environments."""
    num_steps_per_env: list[int] = field(default_factory=lambda: [24])
    """Rollout horizon in control steps per env per PPO iteration."""
    num_mini_batches: list[int] = field(default_factory=lambda: [4])
    """PPO mini-batches per epoch."""
    flags: dict[str, list[Any]] = field(default_factory=dict)
    """Performance flags: name -> choices (see sweep.perf.CATALOG); absent flags keep their defaults."""


#: The knobs of every space besides its flags, by name: the fields of :class:`Knobs` but ``flags``.
KNOB_NAMES = tuple(f.name for f in fields(Knobs) if f.name != "flags")


@dataclass(frozen=True)
class Target:
    """What 'trained' means."""

    success: float = 0.9
    """Held-out success rate that a trial must reach."""
    eval_episodes: int = 256
    """Held-out episodes per evaluation."""
    eval_every_steps: int = 240
    """Control steps per env between evaluations."""
    eval_gate: float = 0.0
    """A checkpoint's held-out pass is skipped while the training-side signal ``eval_gate_signal`` is below this (0:
    a pass at every checkpoint). A pass always runs at the cap. Calibrate it per task from a ledger's signal beside
    its held-out passes (the space file says what was measured)."""
    eval_gate_signal: str = "train_success"
    """Which training-side signal ``eval_gate`` reads: ``train_success`` (the success share of the training episodes
    that ended since the last checkpoint) or ``on_track`` (of the training envs under way, the share that would
    succeed if they ended now; an env that does not give it runs every pass; see docs/methodology.md)."""
    success_term: str | None = None
    """A task's own success rule (Isaac Lab, manager-based tasks): an episode succeeds when it ends by this
    termination term of the task's ``TerminationsCfg`` (e.g. ``goal_reached``). None: the backend's default rule
    (Isaac Lab: velocity tracking, for tasks with a ``base_velocity`` command)."""
    success_fn: str | None = None
    """A task's own success rule (Isaac Lab, any task): ``module:function``, called after every step as
    ``function(env, ended) -> bool tensor`` (``env``: the unwrapped Isaac Lab env; ``ended``: the envs whose episode
    ended in that step; True: that episode succeeded). What Isaac Lab's reset clears before ``step`` returns, the
    task must record itself (docs/isaaclab.md, "Your own task"). At most one of ``success_term`` and ``success_fn``."""


@dataclass(frozen=True)
class Budget:
    """Money limits; the study budget counts every trial, pruned and failed included."""

    usd: float = 5.0
    """Study budget (USD); with ``runs`` an upper bound beside it."""
    runs: float | None = None
    """Study budget in baseline training runs: the study stops once its billed spend (every trial, search and
    confirmation, pruned and failed included) reaches this many times the baseline's mean USD to target on equal
    terms, as ``recommended.yaml``'s ``payback.study_in_baseline_runs`` counts it. Priced once a baseline trial has
    reached the target (the study then runs the baseline, ``confirm.baseline``, first, with or without a
    confirmation) and again with each further baseline seed; until then ``usd`` is the only cap, and it stays one
    after. null: no cap in runs (and the baseline runs in the confirmation only)."""
    later_runs: float | None = None
    """The stop rule: how many later training runs the user expects to make with the recommended config. The search
    ends once no untried config is expected to pay for its trial: its expected saving per later run (the cost
    model's, against the leader's mean cost to target) times this is less than the trial's expected cost
    (docs/methodology.md). A space may use it alone (``runs: null``) or beside ``runs``, which stays a cap. null: no
    stop rule, the search runs until a cap or every config has run. The shipped spaces set it, with their reason."""
    trial_usd: float = 0.5
    """Per-trial cap (USD); a trial that has not reached the target by then ends 'capped'."""
    max_trials: int = 100
    """Upper bound on trials, whatever the budget."""


@dataclass(frozen=True)
class PriceChoice:
    """How seconds become dollars."""

    gpu: str = "auto"
    """Row of sweep/prices.yaml ('h200', 'h100', 'a100', 'l40s', 'cpu') or 'auto' (detect)."""
    kind: str = "on_demand"
    """'on_demand' or 'spot'."""
    usd_per_hour: float | None = None
    """Explicit price per device-hour; overrides the table."""


@dataclass(frozen=True)
class Workers:
    """Where trials run."""

    address: str | None = None
    """None: start a local Ray (bound to 127.0.0.1); 'auto' or 'host:port': join an existing cluster."""
    num: int = 0
    """Worker actors (0: one per GPU, or one per ``cpus_per_trial`` CPUs without GPUs)."""
    cpus_per_trial: int = 2
    """CPU cores per trial on a CPU-only cluster (XLA uses them all)."""
    host: str = "127.0.0.1"
    """Interface a local Ray binds to; change it only on a trusted network."""
    dashboard: bool = False
    """Start Ray's dashboard (on ``host``)."""


@dataclass(frozen=True)
class Constraints:
    """Configs the planner never runs (told to the sampler as infeasible)."""

    max_update_period_s: float = 1.0
    """Largest simulated time between policy updates: horizon x control period (s)."""
    memory_share: float = 0.9
    """Largest share of device memory a config may be estimated to use."""


@dataclass(frozen=True)
class Seeds:
    """Randomness of the search itself."""

    sampler: int = 0
    """Optuna sampler seed."""
    training: int = 1
    """Training seed of trial 0; trial k trains with ``training + k``."""


@dataclass(frozen=True)
class Baseline:
    """The config a recommendation is compared with: what a user runs without sweep (e.g. legged_gym's 4096 x 24 with
    rsl-rl's own runner). It need not lie in the space. A base knob left null takes the space's value where the space
    fixes one (a single choice); a flag left out takes the space's value where the space fixes one, else rsl-rl's
    behaviour (the catalog default)."""

    num_envs: int | None = None
    num_steps_per_env: int | None = None
    num_mini_batches: int | None = None
    flags: dict[str, Any] = field(default_factory=dict)
    """Performance flags by name (see sweep.perf.CATALOG); with ``mode: stock`` only those that act on the
    simulator's compilation alone (``sweep.perf.STOCK_FLAGS``) may differ from rsl-rl's behaviour."""
    mode: str = "stock"
    """How the baseline trains: 'stock' (rsl-rl's own ``OnPolicyRunner.learn``, unchanged: what a user runs without
    sweep) or 'sweep' (this package's training loop with the flags above, e.g. to compare with its flags off)."""


@dataclass(frozen=True)
class Confirm:
    """The confirmation phase: after the search, its best configs and the baseline run on further training seeds,
    raced, and the recommendation is the config with the lowest mean cost to target over its seeds."""

    seeds: int = 1
    """Seeds per finalist, its search seed included; 1: no confirmation (the recommendation is the search's cheapest
    trial). The shipped spaces ask for more."""
    top: int = 2
    """Candidates confirmed besides the baseline: the search's best configs."""
    budget_share: float = 0.3
    """Share of ``budget.usd`` kept for confirmation once a searched config other than the baseline has reached the
    target: the search then starts no trial that would commit more than the rest (0-1; what the search leaves unspent
    goes to confirmation too). Until then there is nothing to confirm and the search may commit all of it."""
    race_factor: float = 1.5
    """A candidate with at least 2 seeds whose mean cost exceeds this times the leader's gets no more seeds."""
    baseline: Baseline = field(default_factory=Baseline)
    """The config the recommendation is compared with; it always gets its seeds."""

    @property
    def enabled(self) -> bool:
        return self.seeds > 1


@dataclass(frozen=True)
class Search:
    """How the search proposes and races configs (the confirmation that follows it: :class:`Confirm`)."""

    sampler: str = "cost"
    """The searcher that proposes configs, a name of :data:`sweep.config.searchers.SEARCHERS`: 'cost' (expected
    improvement per dollar from every trial's cost or partial curve), 'tpe' (Optuna TPE with constraints), 'random'
    or 'grid'."""
    prune: bool = True
    """Stop trials that cannot beat the best known cost to target."""
    race_slack: float = 1.5
    """With ``prune``, a search trial is capped and pruned at this many times the leader's mean cost to target on
    equal terms (>= 1); while each config has one seed, the best known cost, the luckiest seed so far. One seed's cost
    varies widely at a fixed config: at 1 a lucky seed of a worse config caps the best config's trials short of the
    target (docs/decisions/0002-race-slack.md)."""
    intensify: int = 1
    """Search trials a config runs, each on a new training seed, once it leads the search (the lowest mean cost to
    target on equal terms) before the search tries further configs (>= 1; 1: every config once). The race bar is
    then the leader's mean cost, not one lucky seed's."""
    probe: bool = False
    """Hold the exact performance flags the space searches (docs/perf-flags.md: they change nothing learned per env
    step, only its speed) at their fast setting during the search, and decide each by a throughput probe on the
    leader's config when the confirmation starts (one round of training, no held-out pass), not by trials to the
    target. False: they are searched like any knob."""
    screen: bool = False
    """Before the search, train every feasible config for a few iterations with no held-out pass and keep its env
    steps per training second; the cost model then learns env steps to target and divides by each config's measured
    throughput (:mod:`sweep.planner.searchers.screen`). Billed like every trial, each screen with its start-up and
    compilation: it pays only in a space of few configs."""
    prior: str = ""
    """A warm start: the run folder of an earlier study of the same task on the same kind of device. Its search and
    confirmation trials teach the cost model from the first proposal (their seconds at this study's price); they are
    no seeds of this study's configs. '': none."""
    initial: list[Any] = field(default_factory=list)
    """Configs tried first (e.g. legged_gym's 4096 x 24), each a mapping of knob values (checked by validate)."""


@dataclass(frozen=True)
class RunConfig:
    """Everything ``python -m sweep.run`` needs."""

    space: str = "locomotion"
    """Search-space name (search_spaces/<name>.yaml, installed as the package ``sweep.spaces``) or path."""
    backend: str = "mjx_locomotion"
    profile: str = "auto"
    """Task profile; 'auto' picks 'gpu' with a GPU, 'cpu' without."""
    device: str = "auto"
    backend_options: dict[str, Any] = field(default_factory=dict)
    """Backend-specific options (e.g. ``table`` and ``time_scale`` of the replay backend)."""
    knobs: Knobs = field(default_factory=Knobs)
    target: Target = field(default_factory=Target)
    budget: Budget = field(default_factory=Budget)
    price: PriceChoice = field(default_factory=PriceChoice)
    workers: Workers = field(default_factory=Workers)
    constraints: Constraints = field(default_factory=Constraints)
    seeds: Seeds = field(default_factory=Seeds)
    search: Search = field(default_factory=Search)
    confirm: Confirm = field(default_factory=Confirm)
    checkpoints: str = "all"
    """Checkpoints kept in trials/NNNN/ when trials end: 'all' (every trial's latest, as before) or 'reached'
    (only trials that reached the target). A reached trial's checkpoint is never deleted."""
    out: str = "reports"
    """Folder under which reports/<run_id>/ is written."""
    run_id: str = ""
    """Name of the run folder (default: a timestamp)."""
    resume: str = ""
    """A previous run folder to continue (same study, same ledger, budget already spent)."""
