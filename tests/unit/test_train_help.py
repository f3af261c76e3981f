"""`recallkit train --help` names each task's trainers from the registry: it listed the four shipped trainers, so a
trainer a plug-in system registers (a closed-form memory, say) was missing from the help of the command that runs it."""
from types import SimpleNamespace

from recallkit import cli_train, registry


def test_the_trainer_help_lists_each_tasks_own_trainers(monkeypatch):
    config = SimpleNamespace(MODELS=("random_features",))
    plugin = SimpleNamespace(name="rf_ridge", trainers=("ridge",), config_class=lambda: config)
    shipped = registry.tasks()["assoc_memory"]
    monkeypatch.setattr(registry, "tasks", lambda: {"assoc_memory": shipped, "rf_ridge": plugin})
    tasks, models, trainers = cli_train._task_help()
    assert tasks == "assoc_memory | rf_ridge"
    assert trainers == "assoc_memory: adam | adamw; rf_ridge: ridge"
    assert models.endswith("rf_ridge: random_features")
