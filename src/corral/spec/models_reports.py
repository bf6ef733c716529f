"""The `reports:` section: what `corral report usage` charges for GPU time (src/corral/reports/)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from corral.spec.models_base import Strict

GRES_TYPE = r"^[a-z0-9][a-z0-9_.+-]*$"  # a GPU model (h100) or a MIG profile (1g.10gb, 1g.10gb+me)
CURRENCY = r"^[A-Za-z][A-Za-z0-9_]{0,15}$"  # USD, EUR, or a unit of your own (SU, credits)
GpuType = Annotated[str, StringConstraints(pattern=GRES_TYPE, max_length=32)]
Price = Annotated[float, Field(ge=0, le=1_000_000)]
CarbonIntensity = Annotated[float, Field(ge=0, le=5_000)]  # g CO2e per kWh (grids: ~10 to ~1,000)


class ReportsSpec(Strict):
    """Chargeback for `corral report usage`: a price per GPU-hour for each GPU type; the carbon
    intensity its energy figures are multiplied by."""

    gpu_hour_cost: dict[GpuType, Price] = Field(
        default={}, description="GPU model (or MIG profile) of the spec's nodes -> price of one GPU-hour "
                                "of it; `corral report usage` multiplies each job's GPU-hours by it. Types "
                                "without a price are reported as unpriced GPU-hours")
    currency: str = Field(default="USD", pattern=CURRENCY, description="the unit the prices are in, printed "
                                                                       "beside every cost (USD, EUR, SU, ...)")
    co2_g_per_kwh: CarbonIntensity | None = Field(
        default=None, description="grams of CO2 (equivalent) per kWh of the electricity the GPUs use: your "
                                  "grid's or supplier's carbon intensity, e.g. 350; `corral report usage` "
                                  "multiplies each job's GPU energy (DCGM's energy counter, kWh) by it. Unset: "
                                  "no CO2 figure")
