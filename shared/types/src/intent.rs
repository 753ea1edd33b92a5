//! What a message is about, as far as the router's gating and vision routing care. The
//! classifiers live in the router; the names live here because configuration keys by them.

use serde::{Deserialize, Serialize};

/// The intent of a text message, used to decide which toolsets the model is offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Intent {
    /// Greetings, thanks, "ok", a lone emoji: no tools, no recall.
    Trivial,
    /// Finding places: bars, restaurants, venues, areas.
    Venue,
    /// Reserving, cancelling or changing a booking.
    Booking,
    /// Food, calories, diet.
    Nutrition,
    /// Training, workouts, fitness goals.
    Fitness,
    /// The time or date somewhere.
    Time,
    /// Looking something up on the web.
    Search,
    /// Anything else.
    General,
}

impl Intent {
    pub const ALL: [Intent; 8] = [
        Intent::Trivial,
        Intent::Venue,
        Intent::Booking,
        Intent::Nutrition,
        Intent::Fitness,
        Intent::Time,
        Intent::Search,
        Intent::General,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Intent::Trivial => "trivial",
            Intent::Venue => "venue",
            Intent::Booking => "booking",
            Intent::Nutrition => "nutrition",
            Intent::Fitness => "fitness",
            Intent::Time => "time",
            Intent::Search => "search",
            Intent::General => "general",
        }
    }
}

/// What the user wants done with an image (docs/models-and-budgets.md, step 5 of the routing pipeline).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageIntent {
    /// Find the same or a cheaper look-alike of what is pictured.
    DupeSearch,
    /// Estimate the calories of the pictured meal.
    CalorieScan,
    /// Anything else about the picture.
    General,
}

impl ImageIntent {
    pub fn as_str(self) -> &'static str {
        match self {
            ImageIntent::DupeSearch => "dupe_search",
            ImageIntent::CalorieScan => "calorie_scan",
            ImageIntent::General => "general",
        }
    }
}
