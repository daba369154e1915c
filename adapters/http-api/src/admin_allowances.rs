//! The views and answers of a customer's plan allowances (`/api/admin/users/{id}/plan-allowances`):
//! hidden plans an administrator allowed one customer to buy or switch to (a private offer).

use application::ports::PlanAllowance;
use application::use_cases::admin_console::PlanAllowanceError;
use poem_openapi::Object;
use poem_openapi::payload::Json;

use crate::dto::timestamp;
use crate::problem::{Code, Problem, api_response};

/// A hidden plan allowed to one customer.
#[derive(Debug, Clone, Object)]
#[oai(rename_all = "camelCase")]
pub struct PlanAllowanceView {
    /// The customer.
    pub user_id: String,
    /// The plan they may buy or switch to although it is hidden.
    pub plan_id: String,
    /// The administrator who allowed it.
    pub allowed_by: String,
    /// When (RFC 3339).
    pub allowed_at: String,
}

impl From<&PlanAllowance> for PlanAllowanceView {
    fn from(a: &PlanAllowance) -> Self {
        Self {
            user_id: a.user_id.to_string(),
            plan_id: a.plan_id.to_string(),
            allowed_by: a.allowed_by.to_string(),
            allowed_at: timestamp(a.allowed_at),
        }
    }
}

/// A customer's plan allowances.
#[derive(Debug, Clone, Object)]
pub struct PlanAllowanceList {
    /// By plan id.
    pub items: Vec<PlanAllowanceView>,
}

api_response! {
    /// `GET /api/admin/users/{id}/plan-allowances`.
    pub enum PlanAllowancesResponse {
        /// The customer's allowances.
        200 Ok(Json<PlanAllowanceList>),
    }
    problems {
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `user_not_found`.
        404 NotFound,
    }
}

api_response! {
    /// `PUT /api/admin/users/{id}/plan-allowances/{planId}`.
    pub enum AllowPlanResponse {
        /// Allowed (allowing it again answers the first allowance).
        200 Ok(Json<PlanAllowanceView>),
    }
    problems {
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `user_not_found` or `plan_not_found`.
        404 NotFound,
    }
}

api_response! {
    /// `DELETE /api/admin/users/{id}/plan-allowances/{planId}`.
    pub enum RemovePlanAllowanceResponse {
        /// Withdrawn (or there was none); what the customer bought stays.
        204 Removed,
    }
    problems {
        /// `unauthorized`: not signed in.
        401 Unauthorized,
        /// `forbidden`: not an administrator.
        403 Forbidden,
        /// `user_not_found`.
        404 NotFound,
    }
}

/// The problem of a refused allowance change.
pub(crate) fn allowance_problem(e: PlanAllowanceError) -> Problem {
    match e {
        PlanAllowanceError::UserNotFound => Problem::new(Code::UserNotFound, e.to_string()),
        PlanAllowanceError::PlanNotFound => Problem::new(Code::PlanNotFound, e.to_string()),
        PlanAllowanceError::Infra(infra) => infra.into(),
    }
}
