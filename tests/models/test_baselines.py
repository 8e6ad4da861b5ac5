"""The reference forecasts for irregular observation sets: last observed value and per-variable mean."""
import torch

from tsattn.models.baselines import LastObservation, VariableMean, variable_means


def batch():
    # series 0: variable 0 at -3 (1.0), -1 (2.0); variable 1 at -2 (5.0); variable 2 never; padding with var 2
    x_time = torch.tensor([[-3.0, -2.0, -1.0, 0.0], [-4.0, -0.5, 0.0, 0.0]])
    x_var = torch.tensor([[0, 1, 0, 2], [2, 2, 0, 0]])
    x_value = torch.tensor([[1.0, 5.0, 2.0, 9.0], [7.0, 8.0, 0.0, 0.0]])
    x_mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    y_time = torch.tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 4.0]])
    y_var = torch.tensor([[0, 1, 2], [2, 0, 1]])
    y_mask = torch.tensor([[True, True, True], [True, True, False]])
    return dict(x_time=x_time, x_var=x_var, x_value=x_value, x_mask=x_mask, y_time=y_time, y_var=y_var,
                y_mask=y_mask)


def test_last_observation_takes_the_latest_value_and_falls_back_to_the_mean():
    model = LastObservation(3)
    model.fit_means(torch.tensor([10.0, 20.0, 30.0]))
    out = model(**batch())
    torch.testing.assert_close(out, torch.tensor([[2.0, 5.0, 30.0], [8.0, 10.0, 0.0]]))


def test_variable_mean_and_its_fit():
    # var 0: 1, 2 (history); var 1: 5; var 2: 7, 8 (history); targets carry no values in this batch
    b = batch()
    b["y_value"] = torch.zeros_like(b["y_time"])
    b["y_mask"] = torch.zeros_like(b["y_mask"])
    means = variable_means([b], 3)
    torch.testing.assert_close(means, torch.tensor([1.5, 5.0, 7.5], dtype=torch.float64))
    model = VariableMean(3)
    model.fit_means(means)
    torch.testing.assert_close(model(**batch()), torch.tensor([[1.5, 5.0, 7.5], [7.5, 1.5, 0.0]]))
