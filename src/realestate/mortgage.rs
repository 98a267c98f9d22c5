//! Mortgage simulation: what a loan to buy a property costs each month and in total, so the
//! assistants can answer "¿cuánto pagaría al mes?" with figures a bank would recognise instead
//! of the model's arithmetic.
//!
//! French amortisation (the constant payment of almost every Spanish mortgage): for a loan `L`
//! at a monthly rate `r` (the annual nominal rate, TIN, divided by 12) over `n` months, the
//! payment is `P = L·r / (1 − (1 + r)^−n)`, or `L / n` when `r = 0`.
//!
//! Rounding, as Spanish banks draw up the amortisation table (cuadro de amortización):
//! - the payment is `P` rounded to the cent, half away from zero, and is the same every month;
//! - each month's interest is the outstanding balance × `r`, rounded to the cent the same way
//!   (computed exactly in integers), and the rest of the payment repays principal;
//! - the last instalment is whatever is still owed plus its interest, so it absorbs the
//!   rounding of the payment and the loan is repaid to the cent. Rounding the payment down by a
//!   fraction of a cent leaves a few cents or euros more for the last instalment; rounding it
//!   up leaves less. For very small loans at high rates over long terms, the overpaid fractions
//!   can repay the loan a few months early: the schedule then ends there (`months` says when).
//!
//! Hence `total_paid = monthly_payment × (months − 1) + last_payment` and
//! `total_interest = total_paid − loan`, exactly.
//!
//! Money: the price and the down payment are whole currency units, like
//! [`Property::price`](super::Property::price); every result is in cents. The rate is in
//! hundredths of a percent, as banks quote the TIN (3,15 %), so the schedule is computed from
//! an exact rate; only `P` itself goes through floating point (`f64`, relative error around
//! 1e-15 on amounts below 1e11 cents — far from moving a rounding except on an exact tie).

/// Shortest term, in years, Spanish banks offer.
pub const MIN_YEARS: u32 = 5;
/// Longest term, in years.
pub const MAX_YEARS: u32 = 40;
/// Highest annual nominal rate accepted, in percent.
pub const MAX_RATE_PERCENT: f64 = 15.0;
/// The share of the price Spanish banks finance at most for a main residence; the rest, at
/// least 20 %, is the buyer's down payment.
pub const MAX_LOAN_TO_VALUE_PERCENT: u64 = 80;
/// Highest price simulated, in whole currency units: keeps every amount in cents far from
/// overflow and within `f64`'s exact integers.
pub const MAX_PRICE: u64 = 1_000_000_000;

/// Cents of a currency unit.
const CENTS: u64 = 100;
/// Hundredths of a percent (basis points) in a whole rate, times 12 months: the monthly rate of
/// an annual rate of `bp` basis points is `bp / MONTHLY_RATE_DENOMINATOR`.
const MONTHLY_RATE_DENOMINATOR: u64 = 10_000 * 12;

/// What the buyer asks about.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MortgageInput {
    /// Purchase price, whole currency units.
    pub price: u64,
    /// What the buyer pays up front, whole currency units; the loan is the rest.
    pub down_payment: u64,
    /// Annual nominal rate (TIN) in percent, at most two decimals: `3.1` is 3,10 %.
    pub annual_rate_percent: f64,
    /// Term of the loan.
    pub years: u32,
}

/// The figures of a mortgage; every amount in cents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MortgageSimulation {
    /// Amount borrowed: price − down payment.
    pub loan_cents: u64,
    /// The constant monthly payment, rounded to the cent.
    pub monthly_payment_cents: u64,
    /// The last instalment, which absorbs the rounding of the payment.
    pub last_payment_cents: u64,
    /// Instalments paid: `years × 12`, or fewer when rounding repays a tiny loan early.
    pub months: u32,
    /// Everything paid to the bank: the loan plus the interest.
    pub total_paid_cents: u64,
    /// `total_paid_cents − loan_cents`.
    pub total_interest_cents: u64,
}

/// Why a simulation was refused; the text tells the model what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MortgageError {
    #[error("the price must be greater than 0")]
    PriceZero,
    #[error("the price {price} is above {MAX_PRICE}, the highest this simulator handles")]
    PriceTooHigh { price: u64 },
    #[error("years must be between {MIN_YEARS} and {MAX_YEARS}, not {years}")]
    TermOutOfRange { years: u32 },
    #[error(
        "the annual rate must be between 0 and {MAX_RATE_PERCENT} percent, not {annual_rate_percent}"
    )]
    RateOutOfRange { annual_rate_percent: f64 },
    #[error(
        "the annual rate has at most two decimals, as banks quote it (e.g. 3.15), not {annual_rate_percent}"
    )]
    RateTooPrecise { annual_rate_percent: f64 },
    #[error("the down payment ({down_payment}) is more than the price ({price})")]
    DownPaymentAbovePrice { down_payment: u64, price: u64 },
    #[error("the down payment covers the whole price: there is no loan to simulate")]
    NothingToFinance,
    #[error(
        "Spanish banks lend at most {MAX_LOAN_TO_VALUE_PERCENT} % of the price of a main \
         residence: the down payment must be at least {minimum} (20 % of the price {price}), \
         not {down_payment}"
    )]
    DownPaymentBelowMinimum {
        down_payment: u64,
        minimum: u64,
        price: u64,
    },
}

/// The smallest down payment a bank accepts for `price`: 20 %, rounded up to the whole unit so
/// the loan never exceeds 80 %.
pub fn minimum_down_payment(price: u64) -> u64 {
    (price * (100 - MAX_LOAN_TO_VALUE_PERCENT)).div_ceil(100)
}

/// Checks `input` and draws up the amortisation table (see the module documentation for the
/// rounding).
pub fn simulate(input: &MortgageInput) -> Result<MortgageSimulation, MortgageError> {
    let MortgageInput {
        price,
        down_payment,
        annual_rate_percent,
        years,
    } = *input;
    if price == 0 {
        return Err(MortgageError::PriceZero);
    }
    if price > MAX_PRICE {
        return Err(MortgageError::PriceTooHigh { price });
    }
    if !(MIN_YEARS..=MAX_YEARS).contains(&years) {
        return Err(MortgageError::TermOutOfRange { years });
    }
    let rate_bp = rate_basis_points(annual_rate_percent)?;
    if down_payment > price {
        return Err(MortgageError::DownPaymentAbovePrice {
            down_payment,
            price,
        });
    }
    if down_payment == price {
        return Err(MortgageError::NothingToFinance);
    }
    let minimum = minimum_down_payment(price);
    if down_payment < minimum {
        return Err(MortgageError::DownPaymentBelowMinimum {
            down_payment,
            minimum,
            price,
        });
    }
    let loan_cents = (price - down_payment) * CENTS;
    Ok(amortise(loan_cents, rate_bp, years * 12))
}

/// The rate in basis points, refused when out of range or finer than a basis point.
fn rate_basis_points(annual_rate_percent: f64) -> Result<u64, MortgageError> {
    if !(0.0..=MAX_RATE_PERCENT).contains(&annual_rate_percent) {
        // Also NaN, which is in no range.
        return Err(MortgageError::RateOutOfRange {
            annual_rate_percent,
        });
    }
    let hundredths = annual_rate_percent * 100.0;
    let rounded = hundredths.round();
    // `3.1 * 100.0` is 310.00000000000006: tolerate the representation error, not a third
    // decimal.
    if (hundredths - rounded).abs() > 1e-6 {
        return Err(MortgageError::RateTooPrecise {
            annual_rate_percent,
        });
    }
    Ok(rounded as u64)
}

/// The schedule of a loan of `loan_cents` at `rate_bp` basis points a year over `months`.
fn amortise(loan_cents: u64, rate_bp: u64, months: u32) -> MortgageSimulation {
    let payment = constant_payment(loan_cents, rate_bp, months);
    let mut balance = loan_cents;
    let mut total_paid = 0;
    for month in 1..=months {
        let interest = divide_rounding(balance * rate_bp, MONTHLY_RATE_DENOMINATOR);
        if month == months || balance + interest <= payment {
            let last = balance + interest;
            total_paid += last;
            return MortgageSimulation {
                loan_cents,
                monthly_payment_cents: payment,
                last_payment_cents: last,
                months: month,
                total_paid_cents: total_paid,
                total_interest_cents: total_paid - loan_cents,
            };
        }
        // `balance + interest > payment`: the balance stays positive.
        balance = balance + interest - payment;
        total_paid += payment;
    }
    unreachable!("a term has at least {MIN_YEARS} years of months")
}

/// `P = L·r / (1 − (1 + r)^−n)` rounded to the cent, or `L / n` (exactly) at 0 %.
fn constant_payment(loan_cents: u64, rate_bp: u64, months: u32) -> u64 {
    if rate_bp == 0 {
        return divide_rounding(loan_cents, u64::from(months));
    }
    let r = rate_bp as f64 / MONTHLY_RATE_DENOMINATOR as f64;
    // 1 − (1 + r)^−n as −expm1(−n·ln(1 + r)): no cancellation for small rates.
    let annuity = -(-f64::from(months) * r.ln_1p()).exp_m1();
    // Half away from zero, like `f64::round`.
    (loan_cents as f64 * r / annuity).round() as u64
}

/// `numerator / denominator` rounded half away from zero (the operands are not negative).
fn divide_rounding(numerator: u64, denominator: u64) -> u64 {
    (2 * numerator + denominator) / (2 * denominator)
}

#[cfg(test)]
mod tests {
    //! Expected figures were computed independently in Python with `decimal.Decimal` at 60
    //! significant digits: `P = L·r / (1 − (1+r)^−n)` with `r = Decimal(bp) / 120000`, quantized
    //! to the cent with `ROUND_HALF_UP` (the operands are positive, so half away from zero);
    //! then the table month by month — interest = balance·bp/120000 rounded half up in exact
    //! integers, `(2·balance·bp + 120000) // 240000` (a Decimal `balance·r` misses the exact
    //! ties, e.g. balance/480 at 2,5 %), the last instalment = balance + interest — summing
    //! what is paid. The exact `P` is quoted next to
    //! each case; the payments also match the usual bank simulators (948,42 € for 200.000 € at
    //! 3 % over 25 years).

    use super::*;

    fn input(price: u64, down_payment: u64, annual_rate_percent: f64, years: u32) -> MortgageInput {
        MortgageInput {
            price,
            down_payment,
            annual_rate_percent,
            years,
        }
    }

    fn simulation(
        loan_cents: u64,
        monthly_payment_cents: u64,
        last_payment_cents: u64,
        months: u32,
        total_paid_cents: u64,
    ) -> MortgageSimulation {
        MortgageSimulation {
            loan_cents,
            monthly_payment_cents,
            last_payment_cents,
            months,
            total_paid_cents,
            total_interest_cents: total_paid_cents - loan_cents,
        }
    }

    /// Sums the table again, independently of `amortise`'s bookkeeping.
    fn assert_repays_exactly(sim: &MortgageSimulation) {
        assert_eq!(
            sim.total_paid_cents,
            sim.monthly_payment_cents * u64::from(sim.months - 1) + sim.last_payment_cents
        );
        assert_eq!(
            sim.total_interest_cents,
            sim.total_paid_cents - sim.loan_cents
        );
    }

    #[test]
    fn a_loan_of_200_000_at_3_percent_over_25_years_costs_948_42_a_month() {
        // Exact P = 94842.2627… cents: rounded down, so the last instalment is 949,60 €.
        let sim = simulate(&input(250_000, 50_000, 3.0, 25)).unwrap();
        assert_eq!(sim, simulation(20_000_000, 94_842, 94_960, 300, 28_452_718));
        assert_eq!(sim.total_interest_cents, 8_452_718);
        assert_repays_exactly(&sim);
    }

    #[test]
    fn a_loan_of_150_000_at_2_5_percent_over_30_years_costs_592_68_a_month() {
        // Exact P = 59268.1348… cents; last instalment 593,58 €. At 2,5 % the monthly interest
        // is balance / 480, an exact half cent for some balances: it rounds up.
        let sim = simulate(&input(187_500, 37_500, 2.5, 30)).unwrap();
        assert_eq!(sim, simulation(15_000_000, 59_268, 59_358, 360, 21_336_570));
        assert_repays_exactly(&sim);
    }

    #[test]
    fn a_loan_of_360_000_at_3_percent_over_30_years_costs_1_517_77_a_month() {
        // The 450.000 € ático with the minimum 20 % down. Exact P = 151777.4521… cents.
        let sim = simulate(&input(450_000, 90_000, 3.0, 30)).unwrap();
        assert_eq!(
            sim,
            simulation(36_000_000, 151_777, 152_039, 360, 54_639_982)
        );
        assert_eq!(sim.total_interest_cents, 18_639_982);
    }

    #[test]
    fn a_rate_with_two_decimals_is_exact() {
        // 3.1 is not exact in binary; the schedule uses 310 basis points. Loan 240.000 € over
        // 20 years: exact P = 134308.0553… cents.
        let sim = simulate(&input(300_000, 60_000, 3.1, 20)).unwrap();
        assert_eq!(
            sim,
            simulation(24_000_000, 134_308, 134_324, 240, 32_233_936)
        );
    }

    #[test]
    fn at_0_percent_the_loan_is_split_evenly_and_the_last_instalment_absorbs_the_rounding() {
        // 100.000 € / 360 = 277,777…: 359 payments of 277,78 € overpay 0,80 €, so the last is
        // 10.000.000 − 359 × 27.778 = 27.698 cents.
        let sim = simulate(&input(125_000, 25_000, 0.0, 30)).unwrap();
        assert_eq!(sim, simulation(10_000_000, 27_778, 27_698, 360, 10_000_000));
        assert_eq!(sim.total_interest_cents, 0);
        assert_repays_exactly(&sim);
    }

    #[test]
    fn a_payment_rounded_down_leaves_more_for_the_last_instalment() {
        // 200.000 € at 3 %: 0,26 cents a month short for 299 months, with interest on it, is
        // 1,18 € more in the last instalment.
        let sim = simulate(&input(250_000, 50_000, 3.0, 25)).unwrap();
        assert_eq!(sim.last_payment_cents - sim.monthly_payment_cents, 118);
    }

    #[test]
    fn rounding_can_repay_a_tiny_loan_early_and_the_table_ends_there() {
        // Loan 1.339 € at 11,12 % over 40 years: exact P = 1255.806… cents, rounded up to
        // 12,56 €; the 0,19 cents overpaid each month, compounded at 11,12 % for 40 years,
        // repay the loan at instalment 479, which is 9,96 €.
        let sim = simulate(&input(1_674, 335, 11.12, 40)).unwrap();
        assert_eq!(sim.monthly_payment_cents, 1_256);
        assert_eq!(sim.months, 479);
        assert_eq!(sim.last_payment_cents, 996);
        assert_repays_exactly(&sim);
    }

    #[test]
    fn the_minimum_down_payment_is_20_percent_rounded_up() {
        assert_eq!(minimum_down_payment(450_000), 90_000);
        assert_eq!(minimum_down_payment(450_001), 90_001);
        assert_eq!(minimum_down_payment(1), 1);
        assert!(simulate(&input(450_001, 90_001, 3.0, 30)).is_ok());
    }

    #[test]
    fn the_extremes_of_the_ranges_are_accepted() {
        for (rate, years) in [(0.0, 5), (15.0, 40), (0.01, 5), (14.99, 40)] {
            let sim = simulate(&input(MAX_PRICE, MAX_PRICE / 5, rate, years)).unwrap();
            assert_repays_exactly(&sim);
        }
    }

    #[test]
    fn every_invalid_input_is_refused_with_what_to_change() {
        let cases = [
            (input(0, 0, 3.0, 30), MortgageError::PriceZero),
            (
                input(MAX_PRICE + 1, MAX_PRICE, 3.0, 30),
                MortgageError::PriceTooHigh {
                    price: MAX_PRICE + 1,
                },
            ),
            (
                input(300_000, 60_000, 3.0, 4),
                MortgageError::TermOutOfRange { years: 4 },
            ),
            (
                input(300_000, 60_000, 3.0, 41),
                MortgageError::TermOutOfRange { years: 41 },
            ),
            (
                input(300_000, 60_000, -0.5, 30),
                MortgageError::RateOutOfRange {
                    annual_rate_percent: -0.5,
                },
            ),
            (
                input(300_000, 60_000, 15.01, 30),
                MortgageError::RateOutOfRange {
                    annual_rate_percent: 15.01,
                },
            ),
            (
                input(300_000, 60_000, 3.125, 30),
                MortgageError::RateTooPrecise {
                    annual_rate_percent: 3.125,
                },
            ),
            (
                input(300_000, 300_001, 3.0, 30),
                MortgageError::DownPaymentAbovePrice {
                    down_payment: 300_001,
                    price: 300_000,
                },
            ),
            (
                input(300_000, 300_000, 3.0, 30),
                MortgageError::NothingToFinance,
            ),
            (
                input(300_000, 59_999, 3.0, 30),
                MortgageError::DownPaymentBelowMinimum {
                    down_payment: 59_999,
                    minimum: 60_000,
                    price: 300_000,
                },
            ),
        ];
        for (input, error) in cases {
            assert_eq!(simulate(&input), Err(error), "{input:?}");
        }
        assert!(matches!(
            simulate(&input(300_000, 60_000, f64::NAN, 30)),
            Err(MortgageError::RateOutOfRange { .. })
        ));
    }

    #[test]
    fn the_refusals_say_what_to_change() {
        let error = simulate(&input(300_000, 30_000, 3.0, 30)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "Spanish banks lend at most 80 % of the price of a main residence: the down payment \
             must be at least 60000 (20 % of the price 300000), not 30000"
        );
        let error = simulate(&input(300_000, 60_000, 3.0, 50)).unwrap_err();
        assert_eq!(error.to_string(), "years must be between 5 and 40, not 50");
        let error = simulate(&input(300_000, 60_000, 16.0, 30)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the annual rate must be between 0 and 15 percent, not 16"
        );
    }
}
