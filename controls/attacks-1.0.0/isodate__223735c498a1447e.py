# Mutant (isodate/duration.py:171, Duration.__add__):
#   `if other.day > maxdays:`  ->  `if other.day >= maxdays:`
# Duration.__add__ explicitly accepts "anything that looks like a date or datetime
# ('other' has attributes year, month, day)". We pass such a duck-typed date whose
# `day` is a property and count how often it is read.
# Input: DateLike(2024, 3, 30) + Duration(months=1): newmonth=4, maxdays=30, day == maxdays.
#   clean : `30 > 30` False -> else branch `newday = other.day` -> day read TWICE;
#           replace(2024, 4, 30) -> timedelta(0) + date(2024, 4, 30).
#   mutant: `30 >= 30` True -> `newday = maxdays` -> day read ONCE; same date result.
# So the result is equal but the read count (a call count on user code) is 2 vs 1.
import datetime

from isodate import Duration


class DateLike:
    def __init__(self, y, m, d):
        self.year, self.month, self._d = y, m, d
        self.day_reads = 0

    @property
    def day(self):
        self.day_reads += 1
        return self._d

    def replace(self, year, month, day):
        return datetime.date(year, month, day)


def test_day_of_duck_typed_date_read_twice_at_month_end():
    d = DateLike(2024, 3, 30)
    res = d + Duration(months=1)
    assert res == datetime.date(2024, 4, 30)
    assert d.day_reads == 2
